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
    """A stored output as templates see it: parsed JSON for json contracts and approvals."""
    if pn.node.output.format == "json" or pn.kind == "approval":
        return json.loads(text)
    return text


def node_value(pn: PreparedNode, output: Any) -> dict[str, Any]:
    """A done node as templates see it: `nodes.<id>.output` and `.skipped` (false; see
    `conditions.skipped_value`); a gate's fields (`decision`, `values`, `approvers`) also
    directly, as DESIGN.md writes `nodes.review.decision`."""
    if pn.kind == "approval" and isinstance(output, dict):
        return {**output, "output": output, "skipped": False}
    return {"output": output, "skipped": False}
