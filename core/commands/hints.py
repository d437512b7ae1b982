"""The next step under an error, as a person reads it in chat: error data -> wording.

The engine and the store raise errors that carry data (the run, its status, who changed it,
its workflow, and `next_step`: what is allowed next, a `core.errors.Next`); they never write
a chat command. This module is where that data becomes a `/workflow …` line, so every
surface (chat replies, the console, the CLI) words the same situation the same way:

    RunNotResumable(run_id="3f9a…", next_step=Next.WATCH)
      -> "Watch it with `/workflow status 3f9a…` or stop it: `/workflow cancel 3f9a…`."

A hint written by its raiser (the commands layer's own errors, or a class's default) wins.
"""

from __future__ import annotations

from collections.abc import Callable

from core.commands.model import SPECS
from core.errors import BatonError, Next, RunStateError, UnknownWorkflow, UsageError

_Words = Callable[[str, str, str], str]  # (run id, workflow, node) -> the hint

#: One wording per next step; "<run>" stands in when the error names no run.
_WORDING: dict[Next, _Words] = {
    Next.WATCH: lambda r, w, n: f"Watch it with `/workflow status {r}` or stop it: `/workflow cancel {r}`.",
    Next.DECIDE: lambda r, w, n: f"Decide it with `/workflow approve {r}` or `/workflow reject {r}`.",
    Next.RESUME: lambda r, w, n: f"Use `/workflow resume {r}`.",
    Next.SEE: lambda r, w, n: f"See `/workflow status {r}`.",
    Next.CHECK: lambda r, w, n: (
        f"Check `/workflow status {r}`."
        if r != "<run>"
        else "Check the run's status with `/workflow status <run>`."
    ),
    Next.RECHECK: lambda r, w, n: f"Check `/workflow status {r}` and try again if it still applies.",
    Next.FOLLOW: lambda r, w, n: f"Follow it with `/workflow status {r}`.",
    Next.ABANDON: lambda r, w, n: f"To drop it, use `/workflow abandon {r}`.",
    Next.RUN_AGAIN: lambda r, w, n: f"Start a new one with `/workflow run {w}`.",
    Next.REUSE: lambda r, w, n: f"Re-use its results in a new run: `/workflow run {w} --resume-from {r}`.",
    Next.NEW_FROM: lambda r, w, n: f"Start a new run from it: `/workflow run {w} --resume-from {r}`.",
    Next.ATTENTION: lambda r, w, n: f"See which step needs attention with `/workflow status {r}`.",
    Next.RESOLVE: lambda r, w, n: f"Check what happened, then `/workflow resolve {r} {n} done|retry|fail`.",
    Next.DECIDED: lambda r, w, n: f"Nothing more to decide; follow it with `/workflow status {r}`.",
    Next.LIST_RUNS: lambda r, w, n: "Use `/workflow runs` to list recent runs.",
}


def hint(exc: BatonError) -> str:
    """The line shown under `exc`'s message: the hint its raiser wrote (the commands layer,
    or a class's own), else its next step worded."""
    if exc.hint:
        return exc.hint
    if isinstance(exc, RunStateError) and exc.next_step is not None:
        node = str(getattr(exc, "node_id", None) or "<step>")
        return _WORDING[exc.next_step](exc.run_id or "<run>", exc.workflow or "<workflow>", node)
    if isinstance(exc, UnknownWorkflow):
        return "Use `/workflow list` to see the workflows you can run."
    if isinstance(exc, UsageError) and exc.command in SPECS:
        return f"Usage: {usage(exc.command)}"
    return ""


def usage(command: str) -> str:
    """The usage line of a subcommand, as the parser answers with it."""
    return f"/workflow {SPECS[command].usage}"

