"""The `/workflow` commands as frozen records, and the usage line and example of each.

`parser.parse(text)` returns one of these; the handler acts on them. `SPECS` is the one
place that knows each subcommand's words and flags (help, usage errors and did-you-mean
all read it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.store.records import RunStatus


@dataclass(frozen=True, slots=True)
class SetArg:
    """One `--set a.b=value`: the dotted path, the parsed value and the text as typed."""

    path: tuple[str, ...]
    value: Any
    raw: str


@dataclass(frozen=True, slots=True)
class RunCommand:
    workflow: str
    message: str | None = None
    sets: tuple[SetArg, ...] = ()
    args: dict[str, Any] | None = None  # --args JSON
    args_handle: str | None = None  # --args @handle: the hex prefix, without `args:`
    args_from: str | None = None
    resume_from: str | None = None
    force: bool = False
    replace: str | None = None  # --replace <run>: abandon that run (CAS), then start this one


@dataclass(frozen=True, slots=True)
class ResumeCommand:
    run: str


@dataclass(frozen=True, slots=True)
class ApproveCommand:
    run: str
    comment: str | None = None
    #: the words after the run id as typed (quotes resolved): a choice, `name=value`s for the
    #: gate's form, then the comment (`core/commands/voting.py` reads them against the gate)
    words: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RejectCommand:
    run: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class AbandonCommand:
    run: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class CancelCommand:
    run: str


@dataclass(frozen=True, slots=True)
class ResolveCommand:
    run: str
    node: str
    action: str  # done | retry | fail
    output: str | None = None


@dataclass(frozen=True, slots=True)
class InvalidateCommand:
    run: str
    node: str
    downstream: bool = False


@dataclass(frozen=True, slots=True)
class PlanCommand:
    run: str


@dataclass(frozen=True, slots=True)
class StatusCommand:
    run: str | None = None


@dataclass(frozen=True, slots=True)
class RunsCommand:
    open: bool = False  # `--open`: a personal link to the list page instead
    workflow: str | None = None  # `--workflow <name>`: only its runs
    status: str | None = None  # `--status <status>`: only runs with it (a `RunStatus` value)


@dataclass(frozen=True, slots=True)
class QueueCommand:
    """`queue [workflow|key]`: the active and queued runs of concurrency keys."""

    target: str | None = None  # a workflow's name or a key (None: every key)


@dataclass(frozen=True, slots=True)
class OpenCommand:
    run: str | None = None  # None: the latest run here


@dataclass(frozen=True, slots=True)
class ListCommand:
    pass


@dataclass(frozen=True, slots=True)
class ArgsCommand:
    run: str


@dataclass(frozen=True, slots=True)
class AuditCommand:
    """`audit <run>`: one run's trail; `audit --since 7d [--format jsonl|csv]`: the workspace's
    trail over that window, as a file (admins only)."""

    run: str | None = None
    since: str | None = None
    format: str = "jsonl"


@dataclass(frozen=True, slots=True)
class WhoCommand:
    """`who approved <run>`: who decided the run's gates, and every vote."""

    run: str


@dataclass(frozen=True, slots=True)
class PinCommand:
    """`pin <run>` exempts a run from pruning (retention)."""

    run: str


@dataclass(frozen=True, slots=True)
class UnpinCommand:
    """`unpin <run>` makes a pinned run prunable again."""

    run: str


@dataclass(frozen=True, slots=True)
class ScheduleCommand:
    """`schedule add|list|show|pause|resume|run|rm …` (DESIGN.md "Schedules")."""

    action: str  # one of SCHEDULE_ACTIONS
    target: str | None = None  # add: the workflow; show, pause, resume, run, rm: the schedule id
    cron: str | None = None
    every: str | None = None
    timezone: str | None = None
    overlap: str | None = None
    message: str | None = None
    sets: tuple[SetArg, ...] = ()
    note: str | None = None  # pause: why


@dataclass(frozen=True, slots=True)
class SubscribeCommand:
    """`subscribe [workflow|*] [failed|attention|gates|done|queued|all]… [--to <place>]`: this
    conversation (an admin: `--to` another) hears about those events of that workflow's runs."""

    workflow: str = "*"
    classes: tuple[str, ...] = ()  # the words typed; none: the default (failed, attention)
    to: str | None = None


@dataclass(frozen=True, slots=True)
class UnsubscribeCommand:
    """`unsubscribe [workflow|*] [classes]… [--to <place>]`; no workflow: everything here."""

    workflow: str | None = None
    classes: tuple[str, ...] = ()
    to: str | None = None


@dataclass(frozen=True, slots=True)
class SubscriptionsCommand:
    to: str | None = None


@dataclass(frozen=True, slots=True)
class HelpCommand:
    topic: str | None = None


Command = (
    RunCommand
    | ResumeCommand
    | ApproveCommand
    | RejectCommand
    | AbandonCommand
    | CancelCommand
    | ResolveCommand
    | InvalidateCommand
    | PlanCommand
    | StatusCommand
    | RunsCommand
    | QueueCommand
    | OpenCommand
    | ListCommand
    | ArgsCommand
    | AuditCommand
    | WhoCommand
    | PinCommand
    | UnpinCommand
    | ScheduleCommand
    | SubscribeCommand
    | UnsubscribeCommand
    | SubscriptionsCommand
    | HelpCommand
)


@dataclass(frozen=True, slots=True)
class Spec:
    name: str
    usage: str  # without the leading `/workflow `
    example: str
    summary: str
    flags: tuple[str, ...] = ()  # flags taking a value
    switches: tuple[str, ...] = ()  # flags taking none (`--force` is everywhere)
    group: str = "inspect"  # run | approve | own | inspect: who may use it (see authz.may_use)

    @property
    def brief(self) -> str:
        """The summary where a command picker shows it (at most `BRIEF_LIMIT` characters, as
        Discord's subcommand descriptions must be): a longer summary's first clause."""
        if len(self.summary) <= BRIEF_LIMIT:
            return self.summary
        first = self.summary.split(":", 1)[0].split(";", 1)[0]
        return first if len(first) <= BRIEF_LIMIT else first[: BRIEF_LIMIT - 1] + "…"


#: the longest summary a command picker shows whole (Discord refuses longer descriptions)
BRIEF_LIMIT = 100

RESOLVE_ACTIONS = ("done", "retry", "fail")
#: `runs --status …`: every status a run can have
RUN_STATUSES = tuple(str(status) for status in RunStatus)
EXPORT_FORMATS = ("jsonl", "csv")  # `audit --since … --format`
SCHEDULE_ACTIONS = ("add", "list", "show", "pause", "resume", "run", "rm")

SPECS: dict[str, Spec] = {
    s.name: s
    for s in (
        Spec(
            "run",
            "run <name> [message] [--set k=v]… [--args JSON | --args @handle | --args-from <run>]"
            " [--resume-from <run>] [--replace <run>] [--force]",
            'run release-notes "v1.4 for the web team" --set version=1.4',
            "start a run (asks first when an unfinished run of it is here)",
            flags=("--set", "--args", "--args-from", "--resume-from", "--replace"),
            group="run",
        ),
        Spec("resume", "resume <run>", "resume 3f9a", "continue that run, with its own input", group="own"),
        Spec("approve", "approve <run> [choice] [name=value …] [comment]",
             "approve 3f9a hotfix replicas=5 looks good",
             "approve the waiting gate: one of its choices (`hotfix`), its form's values (`replicas=5`), a "
             "comment; with no values, approve what the first approver proposed", group="approve"),
        Spec("reject", "reject <run> [reason]", "reject 3f9a title is wrong", "reject the waiting gate",
             group="approve"),
        Spec("abandon", "abandon <run> [reason]", "abandon 3f9a",
             "discard a failed, paused, needs_attention or running run", group="own"),
        Spec("cancel", "cancel <run>", "cancel 3f9a",
             "stop a running run, or take a queued one out of its queue", group="own"),
        Spec(
            "resolve",
            "resolve <run> <node> done|retry|fail [--output TEXT]",
            'resolve 3f9a publish done --output "posted by hand"',
            "settle a step that needs attention (or one item of a map: `deploy[3]`)",
            flags=("--output",),
            group="own",
        ),
        Spec(
            "invalidate",
            "invalidate <run> <node> [--downstream]",
            "invalidate 3f9a draft --downstream",
            "drop a step's cached result for the next resume",
            switches=("--downstream",),
            group="own",
        ),
        Spec("plan", "plan <run>", "plan 3f9a", "what a resume would run or serve from cache, and why"),
        Spec("status", "status [run]", "status 3f9a", "a run's node table (default: the latest here)"),
        Spec("runs", "runs [--workflow <name>] [--status <status>] [--open]", "runs --status failed",
             "recent runs in this conversation (`--open`: your link to their page)",
             flags=("--workflow", "--status"), switches=("--open",)),
        Spec("queue", "queue [workflow|key]", "queue deploy-prod",
             "runs holding and waiting for a concurrency key's slots: position, requester, time waited"),
        Spec("open", "open [run]", "open 3f9a", "your link to a run's page (default: the latest here)"),
        Spec("list", "list", "list", "workflows you may run"),
        Spec("args", "args <run>", "args 3f9a", "a run's canonical arguments and their handle"),
        Spec("audit", "audit <run> | audit --since 7d [--format jsonl|csv]", "audit --since 7d --format csv",
             "who did what to a run; or, for admins, everything over a window as a file",
             flags=("--since", "--format")),
        Spec("subscribe", "subscribe [workflow|*] [failed|attention|gates|done|queued|all] [--to <place>]",
             "subscribe deploy failed gates",
             "tell this conversation when runs of a workflow fail, need attention, wait at a gate or end",
             flags=("--to",)),
        Spec("unsubscribe",
             "unsubscribe [workflow|*] [failed|attention|gates|done|queued|all] [--to <place>]",
             "unsubscribe deploy", "stop those notices here (no workflow: all of them)", flags=("--to",)),
        Spec("subscriptions", "subscriptions [--to <place>]", "subscriptions",
             "what this conversation is told about, and by whose subscription", flags=("--to",)),
        Spec("who", "who approved <run>", "who approved 3f9a", "who decided a run's gates, and every vote"),
        Spec("pin", "pin <run>", "pin 3f9a", "keep a finished run's history when old runs are pruned",
             group="own"),
        Spec("unpin", "unpin <run>", "unpin 3f9a", "let a pinned run be pruned again", group="own"),
        Spec(
            "schedule",
            'schedule add <workflow> "<cron>"|every <duration> [--tz Z] [--overlap P] [message] [--set k=v]…'
            " | schedule list | schedule show|resume|run|rm <id> | schedule pause <id> [note]",
            'schedule add nightly-report "0 2 * * 1-5" --tz Europe/Paris',
            "runs nobody types: add one here, list, show its fires, pause, resume, fire now, remove",
            flags=("--tz", "--overlap", "--set"),
            group="run",
        ),
        Spec("help", "help [command]", "help run", "this help, or one command's usage"),
    )
}
