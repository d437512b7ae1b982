"""One exception tree for Baton.

Every error a user can meet says what happened and what to do next. The class
docstring is the default message; raise sites pass specifics.

    BatonError
    ├── ConfigurationError          a setting is missing or wrong (names the variable)
    │   └── MissingSecret               a secret a workflow declares is not provided
    ├── WorkflowError               a workflow definition is broken or unknown
    │   ├── WorkflowDefinitionError     load/validation error: file, line, fix
    │   ├── UnknownWorkflow             no workflow by that name
    │   ├── InputValidationError        run args do not match the declared `inputs`
    │   └── TemplateRenderError         a template could not be rendered
    │       └── RenderBudgetExceeded        past its time, size or work budget
    ├── UsageError                  a chat command is malformed (carries the usage line)
    ├── PermissionDenied            the user may not do this (by immutable user id)
    ├── RunStateError               a run is not in a state that allows this
    │   ├── RunNotFound                 no run with that id / prefix
    │   │   └── RunPruned                   it existed, and retention pruned it (when, which workflow)
    │   ├── AmbiguousRunId              a prefix matches several runs
    │   ├── RunNotResumable             CAS lost or status forbids resume (carries status, by, next)
    │   ├── InvalidTransition           a status change DESIGN.md does not allow
    │   ├── GateAlreadyDecided          the approval gate was decided before (run, node, decision, by)
    │   ├── ConcurrencyLimitReached     a run's concurrency key is full (cancel_new, or max_queued)
    │   ├── VoteDiffers                 a vote for other values than the gate's proposal (who, what)
    │   ├── VotesChanged                another vote arrived on the gate since its votes were read
    │   └── ReplayUnsafe                an unsafe step may already have happened
    ├── ScheduleError               a schedule is not there, or changed meanwhile
    │   ├── ScheduleNotFound            no schedule with that id
    │   ├── ScheduleChanged             CAS lost: someone changed (paused, removed) it first
    │   └── FireAlreadyRecorded         that due time of the schedule was fired already
    ├── NodeFailed                  a step failed (exit code, contract violation, timeout)
    │   └── OutputContractViolation     output broke its declared format/schema
    ├── StoreError                  the database failed (translated at the boundary)
    └── PlatformError               a chat platform API failed (translated at the boundary)
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from enum import StrEnum
from typing import Any


class BatonError(Exception):
    """Something went wrong in Baton."""

    #: One line telling the user what to do next, shown under the cause.
    hint: str = ""

    def __init__(self, message: str | None = None, *, hint: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip().splitlines()[0])
        if hint is not None:
            self.hint = hint

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class ConfigurationError(BatonError):
    """A setting is missing or invalid."""

    hint = "Fix the environment variable named above and start Baton again."


class MissingSecret(ConfigurationError):
    """A workflow declares a secret the operator has not provided."""

    def __init__(self, names: Sequence[str], *, workflow: str | None = None, node: str | None = None) -> None:
        self.names = tuple(names)
        listed = ", ".join(f"`{n}`" for n in self.names)
        plural = "s" if len(self.names) > 1 else ""
        owner = f"workflow `{workflow}`" if workflow else f"step `{node}`" if node else "this step"
        super().__init__(
            f"{owner} needs the secret{plural} {listed}, which the operator has not provided "
            "(in BATON_SECRETS_FILE, or listed in BATON_STEP_SECRETS and set in Baton's environment)",
            hint=f"Ask the operator to add {listed} to the file BATON_SECRETS_FILE names (NAME=value), "
            "or to list it in BATON_STEP_SECRETS and set it in Baton's environment; then try again.",
        )


class WorkflowError(BatonError):
    """A workflow could not be used."""


class WorkflowDefinitionError(WorkflowError):
    """A workflow file is invalid."""

    def __init__(
        self, message: str, *, file: str = "", line: int | None = None, hint: str | None = None
    ) -> None:
        self.file = file
        self.line = line
        where = f"{file}:{line}: " if file and line else (f"{file}: " if file else "")
        super().__init__(f"{where}{message}", hint=hint)


class UnknownWorkflow(WorkflowError):
    """No workflow has that name (the commands layer words the next step: list them)."""


class InputValidationError(WorkflowError):
    """The run's arguments do not match the workflow's declared inputs."""

    hint = "Pass the inputs with `--set name=value` or `--args '{...}'`."


class UsageError(BatonError):
    """The command is malformed."""

    def __init__(
        self, message: str, *, usage: str = "", hint: str | None = None, command: str | None = None
    ) -> None:
        self.usage = usage
        #: the chat subcommand the error is about, when the raiser names no usage line itself
        #: (the engine): the commands layer shows that subcommand's usage (`core/commands/hints.py`)
        self.command = command
        super().__init__(message, hint=hint if hint is not None else (f"Usage: {usage}" if usage else None))


class PermissionDenied(BatonError):
    """You are not allowed to do that."""

    hint = "Ask a Baton admin to grant you access."

    def __init__(
        self, message: str | None = None, *, users: Sequence[str] = (), hint: str | None = None
    ) -> None:
        #: the user ids the message names, so a reply can show them as people (mentions)
        self.users = tuple(users)
        super().__init__(message, hint=hint)


class Next(StrEnum):
    """What a person may do next about the run a `RunStateError` names: data, which the
    commands layer words as chat commands (`core/commands/hints.py`); the engine and the
    store never write a `/workflow …` line."""

    WATCH = "watch"  # it runs: follow it, or cancel it
    DECIDE = "decide"  # an approval waits in it: approve or reject
    RESUME = "resume"  # unfinished and at rest: resume it
    SEE = "see"  # see its status
    CHECK = "check"  # check its status
    RECHECK = "recheck"  # it changed while you acted: check it, try again if it still applies
    FOLLOW = "follow"  # it already is what was asked: follow it
    ABANDON = "abandon"  # not running: abandon it to drop it
    RUN_AGAIN = "run_again"  # finished: start a new run of its workflow
    REUSE = "reuse"  # finished: re-use its results in a new run (`--resume-from`)
    NEW_FROM = "new_from"  # finished and cannot be resumed: a new run from it (`--resume-from`)
    ATTENTION = "attention"  # see which of its steps needs attention
    RESOLVE = "resolve"  # an unsafe step may have run: settle it (done | retry | fail)
    DECIDED = "decided"  # the approval was decided: nothing more to decide, follow the run
    LIST_RUNS = "list_runs"  # no such run: list the recent ones


class RunStateError(BatonError):
    """The run is not in a state that allows this."""

    #: the next step when the raiser names none
    default_next: Next | None = None

    def __init__(
        self,
        message: str | None = None,
        *,
        run_id: str | None = None,
        status: str | None = None,
        by: str | None = None,
        hint: str | None = None,
        workflow: str | None = None,
        next_step: Next | None = None,
    ) -> None:
        self.run_id = run_id
        self.status = status
        self.by = by
        self.workflow = workflow  # the run's workflow, when the next step names it
        #: what is allowed next, worded by the commands layer
        self.next_step = next_step if next_step is not None else self.default_next
        super().__init__(message, hint=hint)


class RunNotFound(RunStateError):
    """No run has that id."""

    default_next = Next.LIST_RUNS


class RunPruned(RunNotFound):
    """That run was pruned: its history is gone, only a tombstone says when."""

    def __init__(self, run_id: str, *, workflow: str, status: str, pruned_at: float) -> None:
        self.pruned_at = pruned_at
        day = datetime.datetime.fromtimestamp(pruned_at, tz=datetime.UTC).strftime("%Y-%m-%d")
        super().__init__(
            f"Run {run_id} (`{workflow}`, {status}) was pruned on {day}: its history is no longer kept.",
            run_id=run_id,
            status=status,
            workflow=workflow,
            next_step=Next.RUN_AGAIN,
        )


class AmbiguousRunId(RunStateError):
    """That run id prefix matches several runs (`candidates`: the newest few, as read)."""

    hint = "Type more characters of the run id."

    def __init__(self, message: str, *, run_id: str | None = None, candidates: Sequence[Any] = ()) -> None:
        super().__init__(message, run_id=run_id)
        self.candidates = tuple(candidates)


class RunNotResumable(RunStateError):
    """The run cannot be resumed in its current state."""


class InvalidTransition(RunStateError):
    """That status change is not allowed."""


class ConcurrencyLimitReached(RunStateError):
    """The run's concurrency key is at its limit, and its policy refuses new runs."""

    def __init__(
        self, *, key: str, why: str, active: Sequence[tuple[str, str]], queued: int, limit: int,
        run_id: str | None = None, workflow: str | None = None,
    ) -> None:  # fmt: skip
        #: the key, `cancel_new` (refused by policy) or `max_queued` (the queue is full), the
        #: key's active runs (id, status), how many wait, the key's limit
        self.key = key
        self.why = why
        self.active = tuple(active)
        self.queued = queued
        self.limit = limit
        names = ", ".join(f"{rid} ({status})" for rid, status in self.active) or "none"
        if why == "max_queued":
            message = f"the queue of `{key}` is full ({queued} runs wait; active: {names})"
        else:
            message = f"`{key}` allows {limit} active run(s) and refuses new ones meanwhile (active: {names})"
        first, status = self.active[0] if self.active else (None, "")
        # what stops the active run is its status's: `cancel` only stops a running one
        step = {"paused": Next.DECIDE, "needs_attention": Next.ATTENTION}.get(status, Next.WATCH)
        super().__init__(message, run_id=first, workflow=workflow, next_step=step if first else None)
        self.refused = run_id  # the run that was refused (a resume's), None for a new run


class DeadlineAlreadyFired(RunStateError):
    """A gate's deadline (a reminder, an escalation, a timeout) was fired already, by another
    replica or an earlier tick: a unit of work that fires it again is undone."""


_RULE_DID = {"reject": "rejected it and cancelled the run", "fail": "failed the run",
             "approve": "approved it", "skip": "skipped it"}  # what an `on_timeout` did


class GateAlreadyDecided(RunStateError):
    """This approval gate was already decided."""

    def __init__(
        self, *, run_id: str, node_id: str, decision: str, by: str | None, status: str | None = None,
        timed_out: str | None = None, closed: bool = False,
    ) -> None:  # fmt: skip
        self.decision = decision  # approved | rejected
        self.node_id = node_id
        self.timed_out = timed_out  # the `on_timeout` that decided it (nobody answered in time), if one did
        if timed_out:
            said = (f"the approval {node_id} of run {run_id} already timed out: nobody decided in time, so "
                    f"its timeout rule {_RULE_DID.get(timed_out, decision + ' it')}")
        elif closed:  # nobody decided it: its run ended (abandoned, cancelled by a limit) while it waited
            said = f"the approval {node_id} of run {run_id} was closed undecided when {by} cancelled the run"
        else:
            said = f"the approval {node_id} of run {run_id} was already {decision} by {by}"
        super().__init__(
            said,
            run_id=run_id,
            status=status,
            by=by,
            next_step=Next.DECIDED,
        )


class VoteDiffers(RunStateError):
    """A vote for another choice or other values than the gate's proposal was not counted."""

    def __init__(self, *, run_id: str, node_id: str, by: str, choice: str, values: dict[str, object]) -> None:
        self.node_id = node_id
        self.by = by  # who proposed (the first vote's person)
        self.choice = choice  # the proposal: its choice and form values
        self.values = dict(values)
        super().__init__(
            f"the approval {node_id} of run {run_id} has a proposal by {by} ({choice}); "
            "a vote for anything else is not counted",
            run_id=run_id, by=by, next_step=Next.DECIDE,
        )


class VotesChanged(RunStateError):
    """Another vote arrived on this gate since its votes were read: read them again and decide
    again (`GateKeeper.vote` does)."""


class ReplayUnsafe(RunStateError):
    """An unsafe step may already have happened; Baton will not run it again blindly."""

    def __init__(
        self, message: str | None = None, *, node_id: str | None = None, run_id: str | None = None,
        status: str | None = None,
    ) -> None:  # fmt: skip
        self.node_id = node_id
        super().__init__(message, run_id=run_id, status=status, next_step=Next.RESOLVE)


class ScheduleError(BatonError):
    """The schedule is not in a state that allows this."""

    def __init__(self, message: str | None = None, *, schedule_id: str | None = None,
                 hint: str | None = None) -> None:
        self.schedule_id = schedule_id
        super().__init__(message, hint=hint)


class ScheduleNotFound(ScheduleError):
    """No schedule has that id."""


class ScheduleChanged(ScheduleError):
    """The schedule changed while you acted (paused, resumed or removed by someone else)."""


class FireAlreadyRecorded(ScheduleError):
    """That due time of the schedule was fired already, by another replica or an earlier
    tick: a unit of work that fires it again is undone."""


class FireBusy(ScheduleError):
    """Another replica's batch holds the schedule right now (PostgreSQL, `Batch.units` with
    `share`): this batch left its fire alone; the next tick finds it fired, or fires it."""


class NodeFailed(BatonError):
    """A step failed."""

    def __init__(self, message: str, *, node_id: str, hint: str | None = None) -> None:
        self.node_id = node_id
        super().__init__(message, hint=hint)


class OutputContractViolation(NodeFailed):
    """A step's output broke its declared contract."""

    def __init__(self, message: str, *, node_id: str, rule: str, offending: str) -> None:
        self.rule = rule
        self.offending = offending
        super().__init__(
            message,
            node_id=node_id,
            hint="Fix the step so its output matches `output:`, then resume the run.",
        )


class StoreError(BatonError):
    """The database could not complete the operation."""

    hint = "Check BATON_DATABASE_URL and that the database is reachable, then try again."


class PlatformError(BatonError):
    """The chat platform rejected a request."""


class TemplateRenderError(WorkflowError):
    """A template could not be rendered (an undefined value or a forbidden operation)."""

    hint = "Check the template and the values it uses."


class RenderBudgetExceeded(TemplateRenderError):
    """Rendering a template went past its time, size or work budget."""

    hint = "Simplify the template (or raise the limit named in the message)."


def headline(text: str | None, limit: int = 300) -> str:
    """An error's first line, at most `limit` characters; one that only introduces the next
    ("step `x` exited with code 2; stderr ends with:") with that next line."""
    lines = [part.strip() for part in (text or "").splitlines() if part.strip()]
    line = " ".join(lines[:2]) if len(lines) > 1 and lines[0].endswith(":") else (lines or [""])[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"
