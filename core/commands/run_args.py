"""Building a `run` command's arguments (pure): base args, then `--set`, then the message.

Precedence (DESIGN.md "Scope"): the base is `{}`, or the args of `--resume-from R` /
`--args-from R`; `--args JSON|@handle` replaces it; each `--set a.b=v` then changes one
field (dotted paths build nested objects); a message replaces `inputs.message`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from core.commands.model import SetArg
from core.errors import UsageError

MESSAGE = "message"


def apply_sets(
    base: Mapping[str, Any], sets: Sequence[SetArg], string_inputs: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """A copy of `base` with every `--set` applied in order.

    A value is JSON when it parses, except for inputs the workflow declares as strings:
    `--set version=1.2` gives `"1.2"` there, exactly as typed.
    """
    result: dict[str, Any] = copy.deepcopy(dict(base))
    for item in sets:
        if len(item.path) == 1 and item.path[0] in string_inputs and not isinstance(item.value, str):
            item = SetArg(path=item.path, value=item.raw.partition("=")[2], raw=item.raw)
        node = result
        for depth, key in enumerate(item.path[:-1]):
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                where = ".".join(item.path[: depth + 1])
                raise UsageError(
                    f"`--set {item.raw}`: `{where}` is already a value, not an object",
                    usage="/workflow run <name> [message] [--set k=v]…",
                )
            node = child
        node[item.path[-1]] = copy.deepcopy(item.value)
    return result


def build_args(
    base: Mapping[str, Any],
    sets: Sequence[SetArg],
    message: str | None,
    string_inputs: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    args = apply_sets(base, sets, string_inputs)
    if message is not None:
        args[MESSAGE] = message
    return args
