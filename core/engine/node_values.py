"""What templates see of a done node: `nodes.<id>.output`, `.skipped`, and a gate's fields.

`decode_output` turns a stored output back into a value (parsed JSON for json contracts and
approvals); `node_value` is the node's entry in the template context, the same in the
in-process and the remote executor.
"""

from __future__ import annotations

import json
from typing import Any

from core.engine.prepared import PreparedNode


def decode_output(pn: PreparedNode, text: str) -> Any:
    """A stored output as templates see it: parsed JSON for json contracts, approvals and
    `map:` nodes (the list of their items' outputs)."""
    if pn.node.map is not None:
        return json.loads(text)
    return decode_item(pn, text)


def decode_item(pn: PreparedNode, text: str) -> Any:
    """One step's stored output (a node's, or one item's of a `map:` node); a sub-workflow's
    is its child run's result, `{status, workflow, outputs: {node: output}}`."""
    if pn.node.output.format == "json" or pn.kind in ("approval", "workflow"):
        return json.loads(text)
    return text


def failed_item(output: Any) -> bool:
    """An item output that stands for a failed item (`{failed: true, error}`)."""
    return isinstance(output, dict) and output.get("failed") is True and "error" in output


def node_value(pn: PreparedNode, output: Any) -> dict[str, Any]:
    """A done node as templates see it: `nodes.<id>.output` and `.skipped` (false; see
    `conditions.skipped_value`); a gate's fields (`decision`, `values`, `approvers`) also
    directly, as DESIGN.md writes `nodes.review.decision`; a `map:` node's `ok_count` and
    `failed_count`."""
    if pn.kind == "approval" and isinstance(output, dict):
        return {**output, "output": output, "skipped": False}
    if pn.node.map is not None and isinstance(output, list):
        failed = sum(1 for item in output if failed_item(item))
        return {"output": output, "skipped": False, "ok_count": len(output) - failed, "failed_count": failed}
    return {"output": output, "skipped": False}
