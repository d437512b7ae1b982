"""Which workflows call which (`workflow:` nodes), checked across the catalog at load.

A workflow that calls itself, directly or through others, would start child runs forever;
one whose sub-workflows nest deeper than `MAX_DEPTH` is as likely a mistake. Both are refused
when the catalog is indexed (`Catalog._index`), with one line naming the chain, like a
dependency cycle inside one file. A `workflow:` naming no workflow the catalog knows is
refused the same way, and so is one naming a workflow whose file does not load (the parent
could not run either: the child's definition is part of its key); the child's own entry
keeps the child's error.

`call_problems` is pure: names -> workflows in, the problem of each refused workflow out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from core.workflows.model import Workflow
from core.workflows.validation import did_you_mean

#: at most this many runs in a chain of sub-workflows (the parent counts: a -> b -> c is 3)
MAX_DEPTH = 5


@dataclass(frozen=True, slots=True)
class CallProblem:
    """Why a workflow is refused: at its node `index`'s `workflow:` key."""

    index: int
    message: str
    hint: str


def call_problems(workflows: Mapping[str, Workflow], known: Collection[str]) -> dict[str, CallProblem]:
    """The workflows refused for their calls: a cycle through them, a chain deeper than
    `MAX_DEPTH`, or a call to a workflow not in `known` (every name, broken ones included)."""
    found: dict[str, CallProblem] = {}
    for name, workflow in workflows.items():
        problem = _problem(name, workflow, workflows, known)
        if problem is not None:
            found[name] = problem
    return found


def _problem(
    name: str, workflow: Workflow, workflows: Mapping[str, Workflow], known: Collection[str]
) -> CallProblem | None:
    for index, child in workflow.calls():
        node = workflow.nodes[index].id
        if child not in known:
            guess = did_you_mean(child, list(known))
            return CallProblem(
                index,
                f"node `{node}` calls workflow `{child}`, which does not exist",
                f"Did you mean `{guess}`?" if guess else "Name a workflow that `/workflow list` shows.",
            )
        if child not in workflows:
            return CallProblem(
                index,
                f"node `{node}` calls workflow `{child}`, whose file does not load",
                f"Fix `{child}` first: `baton list` (or `/workflow list`) shows its error.",
            )
    for index, _ in workflow.calls():
        chain = _deepest(name, [name], index, workflows)
        node = workflow.nodes[index].id
        if chain[-1] == name and len(chain) > 1:
            via = " -> ".join(chain)
            direct = "itself" if len(chain) == 2 else "itself through others"
            return CallProblem(
                index,
                f"workflow `{name}` calls {direct} ({via}, at node `{node}`); "
                "it would start child runs forever",
                "Remove the `workflow:` node that closes the loop, or call a different workflow.",
            )
        if len(chain) > MAX_DEPTH:
            last = workflows.get(chain[-1])
            cut = last is not None and any(True for _ in last.calls())  # `_deepest` stopped looking
            depth = f"at least {len(chain) + 1}" if cut else str(len(chain))
            shown = " -> ".join([*chain, "…"] if cut else chain)
            return CallProblem(
                index,
                f"sub-workflows nest {depth} deep ({shown}), more than {MAX_DEPTH}",
                "Flatten the chain: call the deeper workflows' steps from a shallower one.",
            )
    return None


def _deepest(root: str, path: list[str], index: int, workflows: Mapping[str, Workflow]) -> list[str]:
    """The chain the call at node `index` of `path[-1]` leads to: a cycle back to `root`
    (ending in `root`), else the longest chain, cut one past `MAX_DEPTH`."""
    workflow = workflows[path[-1]]
    child = workflow.nodes[index].workflow
    assert child is not None
    chain = [*path, child]
    if child == root or len(chain) > MAX_DEPTH or child not in workflows:
        return chain
    if child in path:  # a loop that does not pass through `root`: that workflow's own problem
        return chain[:-1]
    best = chain
    for sub_index, _ in workflows[child].calls():
        found = _deepest(root, chain, sub_index, workflows)
        if found[-1] == root:
            return found
        if len(found) > len(best):
            best = found
    return best
