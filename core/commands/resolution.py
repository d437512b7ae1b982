"""Which run a message is about, and the fresh-run decision (pure).

`decide_fresh_run` is DESIGN.md's "Fresh run with history": with an unfinished run of the
workflow in the conversation and neither `--force` nor an explicit run id, nothing runs;
the user gets three options (`prompt_options`), each a command that pastes back verbatim.
"""

from __future__ import annotations

import json
from collections.abc import Sequence, Set
from dataclasses import dataclass

from core.commands.model import RunCommand
from core.commands.quoting import quote_word
from core.store.records import Gate, Run, RunStatus

PREVIEW_LIMIT = 160
ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class Start:
    """Start the run now."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """Ask first: `run` is the newest unfinished run of the workflow here."""

    run: Run
    others: int = 0  # further unfinished runs of it here


@dataclass(frozen=True, slots=True)
class Option:
    number: int
    action: str  # resume | approve | abandon | force
    label: str
    command: str  # exact `/workflow …` text without the prefix


def decide_fresh_run(unfinished: Sequence[Run], force: bool, explicit_run: bool) -> Start | Prompt:
    live = [r for r in unfinished if r.status.unfinished]
    if force or explicit_run or not live:
        return Start()
    return Prompt(run=live[0], others=len(live) - 1)


def preview(text: str | None, limit: int = PREVIEW_LIMIT) -> str:
    """One line, at most `limit` characters of `text`, with an ellipsis when cut."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[:limit] + ELLIPSIS


def run_command_text(command: RunCommand, *, force: bool | None = None, replace: str | None = None) -> str:
    """The canonical text of a `run` command, quoted so that `parse` reads it back verbatim;
    `replace`: the run option 2 abandons before this one starts (`--replace`)."""
    words = ["run", quote_word(command.workflow)]
    if force if force is not None else command.force:
        words.append("--force")
    replace = replace if replace is not None else command.replace
    if replace is not None:
        words.append(f"--replace {quote_word(replace)}")
    words += [f"--set {quote_word(s.raw)}" for s in command.sets]
    if command.args is not None:
        words.append(f"--args {quote_word(json.dumps(command.args, sort_keys=True, ensure_ascii=False))}")
    if command.args_handle is not None:
        words.append(f"--args @args:{command.args_handle}")
    if command.args_from is not None:
        words.append(f"--args-from {quote_word(command.args_from)}")
    if command.resume_from is not None:
        words.append(f"--resume-from {quote_word(command.resume_from)}")
    if command.message is not None:
        words.append(quote_word(command.message))
    return " ".join(words)


def prompt_options(prompt: Prompt, command: RunCommand, *, gate_waiting: bool) -> tuple[Option, ...]:
    """The three choices of the fresh-run prompt; option 3 carries the new message and flags."""
    run = prompt.run
    if run.status is RunStatus.PAUSED and gate_waiting:
        first = Option(1, "approve", "Approve its waiting gate", f"approve {run.id}")
    else:
        first = Option(1, "resume", "Resume that run (with its own input)", f"resume {run.id}")
    return (
        first,
        Option(2, "abandon", "Abandon it, then run again",
               run_command_text(command, force=False, replace=run.id)),
        Option(3, "force", "Start fresh, leave it as it is", run_command_text(command, force=True)),
    )


def next_commands(
    run: Run, message: str | None, *, gate_waiting: bool, may_decide: bool
) -> list[tuple[str, str]]:
    """What one may do next with `run`, for its status: (kind, command without `/workflow `),
    each pasting back verbatim; `approve`/`reject` only for whoever may decide the gate that
    waits (`may_decide`). `message`: the run's own, for a fresh run of the same input."""
    status = run.status
    items: list[tuple[str, str]] = []
    if gate_waiting:
        if may_decide:
            items += [("approve", f"approve {run.id}"), ("reject", f"reject {run.id}")]
    elif status.unfinished:
        items.append(("resume", f"resume {run.id}"))
    items.append(("plan", f"plan {run.id}"))
    items.append(("resume_from", f"run {run.workflow} --resume-from {run.id}"))
    items.append(("fresh", f"run {run.workflow} --force" + (f" {quote_word(message)}" if message else "")))
    if status is RunStatus.QUEUED:
        items.append(("dequeue", f"cancel {run.id}"))
    elif status in (RunStatus.RUNNING, RunStatus.PENDING):
        items.append(("stop", f"cancel {run.id}"))
    elif status.unfinished:
        items.append(("abandon", f"abandon {run.id}"))
    return items


def gates_addressed(
    gates: Sequence[tuple[Run, Gate]], *, thread_runs: Set[str], direct: bool, mentions_bot: bool
) -> list[tuple[Run, Gate]]:
    """The waiting gates of a conversation that a plain message in it addresses (DESIGN.md
    "Natural-language approval"). `thread_runs`: the runs whose thread the message is in.

    In a run's thread: that run's gates and no other, whatever its status (a mention of the bot
    in a finished run's thread never decides another run). Outside any run's thread, a direct
    conversation or a mention of the bot addresses every gate waiting in the conversation.
    Ordinary chatter addresses none.
    """
    if thread_runs:
        return [(r, g) for r, g in gates if r.id in thread_runs]
    if direct or mentions_bot:
        return list(gates)
    return []


def latest_run(runs: Sequence[Run]) -> Run | None:
    return max(runs, key=lambda r: r.created_at, default=None)
