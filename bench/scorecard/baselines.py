"""Two resume-cache keyings other tools use, implemented here only to score them against Baton.

- **node id**: a step whose id completed in the earlier run is re-used, whatever changed
  ("re-use anything completed").
- **byte-exact prompt prefix**: the run is one transcript, as an agent framework or an LLM
  prompt cache sees it: the arguments exactly as typed, then for each step in execution
  order its instruction text and its output. A step is re-used when the transcript up to
  and including its instruction is byte-for-byte one the earlier run had.

Both are given Baton's explicit controls for free: a step that was invalidated or is
`memoize: false` is never re-used. The score is then about the keying alone.

Everything here is pure and independent of Baton's code: workflows are read as plain YAML.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KINDS = ("bash", "script", "prompt", "tool", "approval")


@dataclass(frozen=True)
class Step:
    id: str
    deps: tuple[str, ...]
    instruction: str  # the text the step is given, as written (templates unrendered)
    memoize: bool


def instruction_of(node: Mapping[str, Any]) -> str:
    """What a transcript records for a step: its kind and body; a tool's `with:` as written."""
    kind = next(k for k in KINDS if k in node)
    text = f"{kind}: {node[kind]}"
    if "with" in node:
        text += " with " + json.dumps(node["with"])  # key order as written
    if node.get("files"):
        text += " files " + json.dumps(node["files"])  # the names; their content is not in the text
    return text


def steps_of(workflow: Mapping[str, Any]) -> list[Step]:
    """The steps of a parsed workflow YAML, in execution order (dependencies first, then file order)."""
    nodes = workflow["nodes"]
    defaults = workflow.get("defaults") or {}
    steps = {
        n["id"]: Step(
            id=n["id"],
            deps=tuple(n.get("depends_on") or ()),
            instruction=instruction_of(n),
            memoize=bool(n.get("memoize", defaults.get("memoize", True))),
        )
        for n in nodes
    }
    position = {n["id"]: i for i, n in enumerate(nodes)}
    waiting = {sid: len(set(s.deps)) for sid, s in steps.items()}
    ready = [position[sid] for sid, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[Step] = []
    while ready:
        step = steps[nodes[heapq.heappop(ready)]["id"]]
        order.append(step)
        for other in steps.values():
            if step.id in other.deps:
                waiting[other.id] -= 1
                if waiting[other.id] == 0:
                    heapq.heappush(ready, position[other.id])
    return order


def node_id_skips(
    steps: Sequence[Step], completed_before: set[str], dropped: set[str]
) -> frozenset[str]:
    return frozenset(s.id for s in steps if s.id in completed_before and s.id not in dropped and s.memoize)


def _digest(text: bytes) -> str:
    return hashlib.sha256(text).hexdigest()


class Transcript:
    """A running byte-exact prefix hash: arguments as typed, then instruction/output pairs."""

    def __init__(self, args_raw: str) -> None:
        self._hash = hashlib.sha256(b"args\x00" + args_raw.encode())

    def key_with(self, instruction: str) -> str:
        probe = self._hash.copy()
        probe.update(b"\x01" + instruction.encode())
        return probe.hexdigest()

    def append(self, instruction: str, output: str) -> None:
        self._hash.update(b"\x01" + instruction.encode() + b"\x02" + output.encode())


def prefix_keys(args_raw: str, steps: Sequence[Step], outputs: Mapping[str, str]) -> dict[str, str]:
    """Each step's prefix key in a run that produced `outputs`."""
    transcript = Transcript(args_raw)
    keys: dict[str, str] = {}
    for step in steps:
        keys[step.id] = transcript.key_with(step.instruction)
        transcript.append(step.instruction, outputs[step.id])
    return keys


def prefix_skips(
    args_raw: str,
    steps: Sequence[Step],
    earlier: Mapping[str, str],  # prefix key -> the output the earlier run stored under it
    fresh: Mapping[str, str],  # what each step outputs when it runs now
    dropped: set[str],
) -> frozenset[str]:
    """The steps a prefix cache re-uses. A re-used step feeds its *stored* output forward."""
    transcript = Transcript(args_raw)
    skipped: set[str] = set()
    for step in steps:
        key = transcript.key_with(step.instruction)
        if key in earlier and step.memoize and step.id not in dropped:
            skipped.add(step.id)
            output = earlier[key]
        else:
            output = fresh[step.id]
        transcript.append(step.instruction, output)
    return frozenset(skipped)
