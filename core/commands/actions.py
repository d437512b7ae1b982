"""Acting on parsed commands: authorize, call the engine or the store, build the replies.

One function per subcommand, all taking the same `Context`. The engine enforces the state
rules (and raises `RunNotResumable` with a hint); this layer adds who may act, the
fresh-run prompt, argument assembly and the replies.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.commands import audit_export, authz, queueing, replies, schedule_actions, voting
from core.commands.approval import undercut
from core.commands.forms import inputs_form
from core.commands.messages import ChatMessage, Reply
from core.commands.model import (
    SPECS,
    AbandonCommand,
    ApproveCommand,
    ArgsCommand,
    AuditCommand,
    CancelCommand,
    Command,
    HelpCommand,
    InvalidateCommand,
    ListCommand,
    OpenCommand,
    PinCommand,
    PlanCommand,
    QueueCommand,
    RejectCommand,
    ResolveCommand,
    ResumeCommand,
    RunCommand,
    RunsCommand,
    ScheduleCommand,
    StatusCommand,
    UnpinCommand,
    WhoCommand,
)
from core.commands.pages import RunPages
from core.commands.resolution import Prompt, decide_fresh_run, latest_run, prompt_options, run_command_text
from core.commands.run_args import MESSAGE, build_args
from core.commands.scheduler import Scheduler
from core.config import Access
from core.engine.ballots import Ballot
from core.engine.engine import Engine
from core.engine.tools import unregistered
from core.errors import (
    AmbiguousRunId,
    BatonError,
    ConfigurationError,
    PermissionDenied,
    RunNotFound,
    RunNotResumable,
    UsageError,
    WorkflowError,
)
from core.redaction import Redactor
from core.store.cas import normalize_prefix, who_changed
from core.store.handles import handle_prefix
from core.store.port import Ballots, Blobs, Events, Gates, Retention, Runs, Schedules, Subscriptions, Views
from core.store.records import Gate, Run, RunStatus
from core.workflows.args import canonical_json, check_typed_keys, missing_inputs, validate_inputs
from core.workflows.catalog import Catalog
from core.workflows.model import Workflow
from core.workflows.subworkflows import MAX_DEPTH
from core.workflows.validation import did_you_mean

#: What option 2 of the fresh-run prompt abandons: an unfinished run at rest, as it was offered.
REPLACEABLE = (RunStatus.FAILED, RunStatus.PAUSED, RunStatus.NEEDS_ATTENTION)


class CommandStore(Protocol):
    """The store roles commands read and write outside a unit of work."""

    @property
    def runs(self) -> Runs: ...
    @property
    def gates(self) -> Gates: ...
    @property
    def ballots(self) -> Ballots: ...
    @property
    def blobs(self) -> Blobs: ...
    @property
    def events(self) -> Events: ...
    @property
    def views(self) -> Views: ...
    @property
    def retention(self) -> Retention: ...
    @property
    def schedules(self) -> Schedules: ...
    @property
    def subscribers(self) -> Subscriptions: ...


@dataclass
class Context:
    store: CommandStore
    engine: Engine
    catalog: Catalog
    access: Access
    message: ChatMessage
    uid: str
    redactor: Redactor  # the runtime's one redactor (audit rows this layer writes)
    announced: set[str] = field(default_factory=set)  # runs whose ending this reply already tells
    run_ref: str | None = None  # the run the message is about, when known (for the audit trail)
    found: dict[str, Run] = field(default_factory=dict)  # runs looked up for this message, by ref
    #: the audit row of this message, written with the event's `finish_event` (one round trip)
    pending_audit: dict[str, Any] | None = None
    pages: RunPages | None = None  # personal links to run pages; None: the pages are off
    thread_runs: list[Run] | None = None  # the runs of the message's thread, when already read
    clock: Callable[[], float] = time.time  # when a vote is cast (escalation, deadlines)
    #: edits the messages waiting on a gate to show its policy's new state (`offers.restate`)
    restate: Callable[[str, str, dict[str, Any]], Awaitable[None]] | None = None
    #: fires schedules (`schedule run <id>`); None: no scheduler in this process
    scheduler: Scheduler | None = None

    async def announcing(self, run_id: str, ending: Awaitable[Run]) -> Run:
        return await _announcing(self, run_id, ending)

    def lookup(self, ref: str) -> Run:
        """The run `ref` names, looked up once per message (the audit trail, the action and an
        error reply all need it; the engine's CAS on the run's version catches a stale copy),
        whoever may see it: for the audit trail only (`find` for everything a person is told)."""
        run = self.found.get(ref)
        if run is None:
            run = self.found[ref] = self.store.runs.find_run(ref)
        return run

    def find(self, ref: str) -> Run:
        """The run `ref` (an id or a unique prefix) names among those the user may see: those
        they may view, and those of the conversation they write in (whose thread shows them to
        everyone there; its buttons name them). Any other run answers as one that does not
        exist, word for word, and a prefix lists only runs they may see, so nobody (an agent
        with no grants, a person in another channel) learns which ids, workflows or requesters
        exist by trying prefixes, as for args handles."""
        try:
            run = self.lookup(ref)
        except AmbiguousRunId as exc:
            seen = [r for r in exc.candidates if isinstance(r, Run) and self.sees(r)]
            if len(seen) == 1 and len(exc.candidates) < AMBIGUOUS_READ:
                return seen[0]  # the one match the user may see (every match was read)
            if not seen:
                raise _not_found(ref) from None
            listed = ", ".join(r.id for r in seen)
            raise AmbiguousRunId(f"Run id {exc.run_id} matches several runs: {listed}.",
                                 run_id=exc.run_id) from None  # fmt: skip
        if not self.sees(run):
            raise _not_found(ref)
        return run

    def sees(self, run: Run) -> bool:
        here = (run.platform, run.conversation) == (self.message.platform, self.message.conversation)
        return here or self.may_view(run)

    def may_view(self, run: Run) -> bool:
        return authz.may_view(self.access, self.uid, run, authz.gate_approvers(self.catalog, run))

    def require_view(self, run: Run) -> None:
        authz.require_view(self.access, self.uid, run, authz.gate_approvers(self.catalog, run))


#: how many runs a run id prefix reads (`Runs.find_run`): fewer read means every match was
AMBIGUOUS_READ = 6


def _not_found(ref: str) -> RunNotFound:
    """What the store answers an id no run has (`Runs.find_run`), word for word: also the
    answer to an id of a run the user may not see, so the two cannot be told apart."""
    prefix = normalize_prefix(ref)
    if prefix is not None:
        return RunNotFound(f"No run id starts with {prefix}.", run_id=prefix)
    typed = ref.strip()
    return RunNotFound(f"No run has the id {typed!r}.", run_id=typed)  # as typed: a secret stays masked


# -- gates -----------------------------------------------------------------------------------


def node_approvers(ctx: Context, run: Run, node_id: str) -> list[str] | None:
    try:
        return ctx.catalog.get(run.workflow).node(node_id).approvers
    except (WorkflowError, KeyError):  # workflow gone or node renamed: settings decide
        return None


async def decide(ctx: Context, run: Run, approve: bool, comment: str | None,
                 words: tuple[str, ...] = ()) -> list[Reply]:
    """Approve or reject `run`'s waiting gate as typed in chat: the words read into a ballot
    (`voting.read_ballot`), then decided like any other (`vote`)."""
    ctx.run_ref = run.id
    gate, blob = ctx.store.views.gate_and_args(run)  # one query: the engine needs the args
    if gate is None or run.status is not RunStatus.PAUSED:
        gate = ctx.engine.gates.to_decide(run)  # raises: who decided it, or why nothing waits
    spec = ctx.engine.gates.spec(run, gate)  # how the words read: the gate's choices and form
    ballot = voting.read_ballot(spec, words, comment, reject=not approve, user=ctx.uid, run=run, gate=gate,
                                at=ctx.clock())  # fmt: skip
    return await vote(ctx, ballot, run=run, gate=gate, args=json.loads(blob))


async def vote_on(ctx: Context, ballot: Ballot) -> list[Reply]:
    """`ballot` on the run it names (an id, or a prefix of one): its gate when it names one,
    else the gate a decision about that run answers (a child's, when the run waits on a
    `workflow:` step; `which_gate` when several children wait)."""
    run = ctx.find(ballot.run)
    if ballot.node is None:
        held = _gate_holder(ctx, run)
        if isinstance(held, list):
            return [replies.which_gate(held, "reject" if ballot.rejects else "approve")]
        run = held
    return await vote(ctx, dataclasses.replace(ballot, run=run.id), run=run)


async def vote(ctx: Context, ballot: Ballot, *, run: Run, gate: Gate | None = None,
               args: Mapping[str, Any] | None = None) -> list[Reply]:
    """`ballot` decided on `run`'s gate (`voting.cast`), told in the run's thread."""
    ctx.run_ref = run.id
    answer = await voting.cast(ctx, ballot, run=run, gate=gate, args=args)
    return [in_run_thread(ctx, run, r) for r in answer]  # typed in the channel: told in the thread


# -- commands --------------------------------------------------------------------------------


async def run(ctx: Context, cmd: RunCommand) -> list[Reply]:
    authz.require_run(ctx.access, ctx.uid, cmd.workflow)
    msg = ctx.message
    origin_event = f"{msg.platform}:{msg.event_id}"
    try:
        workflow = ctx.catalog.get(cmd.workflow)
    except WorkflowError:
        # removed since a first delivery started it?
        already, _ = ctx.store.views.command_runs(origin_event, cmd.workflow, msg.platform, msg.conversation)
        if already is None:
            raise
        return [replies.run_started(already, ctx.engine.args_of(already).get(MESSAGE))]
    # the run a first delivery of this event started, and the fresh-run prompt's runs: one query
    already, unfinished = ctx.store.views.command_runs(
        origin_event, workflow.name, msg.platform, msg.conversation
    )
    if already is not None:  # a redelivery: the first delivery started it, then its replica died
        return [replies.run_started(already, ctx.engine.args_of(already).get(MESSAGE))]
    base: dict[str, Any] = {}
    source: Run | None = None
    for ref in (cmd.resume_from, cmd.args_from):
        if ref is not None:
            origin = ctx.find(ref)
            ctx.require_view(origin)
            if origin.workflow != workflow.name:
                raise UsageError(f"run {origin.id} is a run of `{origin.workflow}`, not `{workflow.name}`",
                                 usage=f"/workflow {SPECS['run'].usage}")
            base = ctx.engine.args_of(origin)
            source = origin if ref == cmd.resume_from else source
    replaced = _replaced(ctx, cmd, workflow.name)
    if cmd.args is not None:
        base = dict(cmd.args)
    if cmd.args_handle is not None:
        base = json.loads(ctx.store.blobs.get_blob(viewable_args(ctx, cmd.args_handle)))
    args = build_args(base, cmd.sets, cmd.message, string_inputs(workflow))
    typed = [s.path[0] for s in cmd.sets] + list(cmd.args or ())
    check_typed_keys(workflow, typed, args)  # `--set versoin=1.4`: a near miss, never a free field
    form = inputs_form(workflow, cmd, args) if typed_only(cmd) else None
    if form is not None:  # required inputs missing: ask for them (a form where there is one)
        return [replies.input_form(form, workflow.name, missing_inputs(workflow, args))]
    validate_inputs(workflow, args)  # InputValidationError before anything runs
    explicit = source is not None or bool(cmd.args_from) or replaced is not None
    if msg.principal is not None:  # agents share the conversation they report in: their own runs only
        unfinished = [r for r in unfinished if r.requester == ctx.uid]
    else:  # a run one may not resume nor abandon is not one a new run would continue: its options
        unfinished = [r for r in unfinished if authz.owns(ctx.access, ctx.uid, r)]  # would be refused
    decision = decide_fresh_run(unfinished, cmd.force, explicit_run=explicit)
    if isinstance(decision, Prompt):
        old = decision.run
        waiting = ctx.engine.gates.waiting(old) is not None
        options = prompt_options(decision, cmd, gate_waiting=waiting)
        old_message = ctx.engine.args_of(old).get(MESSAGE)
        ctx.store.events.audit(actor=ctx.uid, action="fresh_run_prompt", run_id=old.id, details={
            "workflow": workflow.name, "options": [ctx.redactor.redact(o.command) for o in options]})
        return [replies.fresh_run_prompt(decision, options, old_message, cmd.message)]
    answer: list[Reply] = []
    if replaced is not None:  # option 2: abandon it (a CAS on the version just read), then start
        ctx.engine.check_start(workflow.name, args)  # a run that cannot start abandons nothing
        done = await _announcing(ctx, replaced.id, ctx.engine.abandon(replaced, actor=ctx.uid))
        answer.append(replies.run_cancelled(done, ctx.uid, None))
    started = await ctx.engine.start_run(
        workflow=workflow.name, args=args, platform=msg.platform, conversation=msg.conversation,
        thread=msg.thread, requester=ctx.uid, resume_from=source.id if source else None,
        origin_event=origin_event,
    )
    queue = queueing.waiting(ctx.store, started, ctx.clock())
    return [*answer, replies.run_started(started, args.get(MESSAGE), page=ctx.pages is not None, queue=queue)]


def _replaced(ctx: Context, cmd: RunCommand, workflow: str) -> Run | None:
    """The run `--replace` names, as it is now: an unfinished run of this workflow that rests
    (failed, paused, needs_attention) and the user may abandon. Otherwise someone acted on it
    since the prompt offered it (resumed, abandoned): nothing starts, and the error says who."""
    if cmd.replace is None:
        return None
    old = ctx.find(cmd.replace)
    if old.workflow != workflow:
        raise UsageError(f"run {old.id} is a run of `{old.workflow}`, not `{workflow}`",
                         usage=f"/workflow {SPECS['run'].usage}")
    authz.require_owner(ctx.access, ctx.uid, old, "abandon")
    if old.status not in REPLACEABLE:
        raise RunNotResumable(
            f"run {old.id} is {old.status.value} ({who_changed(old)}), so it was not abandoned; "
            "nothing was started",
            run_id=old.id, status=old.status.value, by=old.status_by,
            hint=f"See `/workflow status {old.id}`; to start a new run beside it anyway: "
                 f"`/workflow {run_command_text(dataclasses.replace(cmd, replace=None), force=True)}`.",
        )
    return old


def string_inputs(workflow: Workflow) -> frozenset[str]:
    return frozenset(name for name, spec in workflow.inputs.items() if spec.type == "string")


def typed_only(cmd: RunCommand) -> bool:
    """The run's args are what this command typed (no `--args`, no other run's args): a form
    can ask for what is missing."""
    return cmd.args is None and cmd.args_handle is None and cmd.args_from is None and cmd.resume_from is None


def viewable_args(ctx: Context, handle: str) -> str:
    """The args digest an `--args @handle` names, among the args of runs the user may view
    (`authz.may_view`). A handle of a run they may not view, of a step's output or of nothing
    at all gets the same answer, byte for byte: which prefixes exist is never revealed."""
    prefix = handle_prefix(handle) or handle.strip().lower()
    runs = ctx.store.runs.runs_with_args(prefix)
    digests = {r.args_digest for r in runs if ctx.may_view(r)}
    if not digests:  # the same words for every unmatched handle: the prefix is not echoed
        raise UsageError(
            "No args of a run you may view match that handle.",
            hint="`/workflow args <run>` shows the handle of a run's args.",
        )
    if len(digests) > 1:
        raise UsageError(
            f"args:{prefix} matches the args of several runs you may view.",
            hint="Type more characters of the handle.",
        )
    return digests.pop()


async def resume(ctx: Context, cmd: ResumeCommand) -> list[Reply]:
    target = ctx.find(cmd.run)
    authz.require_owner(ctx.access, ctx.uid, target, "resume")
    after = await ctx.engine.resume(target.id, actor=ctx.uid)
    resumed = replies.run_resumed(after, ctx.uid, queueing.waiting(ctx.store, after, ctx.clock()))
    return [in_run_thread(ctx, target, resumed)]


def in_run_thread(ctx: Context, run: Run, reply: Reply) -> Reply:
    """`reply` in `run`'s thread when it has one in the conversation asked from (a prompt's
    button in the channel's root): the run's story stays in one place."""
    msg = ctx.message
    if (run.thread is None or reply.how.ephemeral or msg.thread == run.thread
            or (run.platform, run.conversation) != (msg.platform, msg.conversation)):
        return reply
    return reply.at(thread=run.thread, conversation=run.conversation)


async def approve(ctx: Context, cmd: ApproveCommand) -> list[Reply]:
    meant = _decided_here(ctx, cmd.run)
    if isinstance(meant, Run):
        meant = _gate_holder(ctx, meant)
    if isinstance(meant, Run):
        return await decide(ctx, meant, True, cmd.comment, cmd.words)
    if len(meant) > 1:
        return [replies.which_gate(meant, "approve")]
    words = (cmd.run, *cmd.words)  # `approve looks fine`: the first word is the comment's
    if undercut(" ".join(words)):  # `approve after the tests pass`: as unclear as its head form
        return [replies.approval_question(*meant[0])]
    return await decide(ctx, meant[0][0], True, " ".join(words), words)


async def reject(ctx: Context, cmd: RejectCommand) -> list[Reply]:
    meant = _decided_here(ctx, cmd.run)
    if isinstance(meant, Run):
        meant = _gate_holder(ctx, meant)
    if isinstance(meant, Run):
        return await decide(ctx, meant, False, cmd.reason)
    if len(meant) > 1:
        return [replies.which_gate(meant, "reject")]
    reason = " ".join(w for w in (cmd.run, cmd.reason) if w)  # `reject too risky`: all of it the reason
    return await decide(ctx, meant[0][0], False, reason)


def _gate_holder(ctx: Context, run: Run) -> Run | list[tuple[Run, Gate]]:
    """The run whose gate a decision about `run` answers: `run` itself, or, when it is paused
    waiting on a child run (a `workflow:` step) and asks nothing of its own, the child whose
    gate waits (through grandchildren); the waiting gates when several children wait."""
    store = ctx.store
    for _ in range(MAX_DEPTH):
        if run.status is not RunStatus.PAUSED or store.gates.waiting_gate(run.id) is not None:
            return run
        paused = [c for c in store.runs.child_runs([run.id]) if c.status is RunStatus.PAUSED]
        waiting = [(c, g) for c in paused for g in [store.gates.waiting_gate(c.id)] if g is not None]
        if len(waiting) > 1:
            return waiting
        if waiting:
            return waiting[0][0]
        if len(paused) != 1:
            return run
        run = paused[0]  # a grandchild's gate
    return run


#: characters of a run id a decision's first word needs to be read as one (`approve a small
#: change` names no run; `approve 3f9a` does)
MIN_RUN_WORD = 4


def run_word(ref: str) -> str | None:
    """`ref`, the first word after `approve`/`reject`, as a run id when it reads as one: at
    least `MIN_RUN_WORD` hex characters, a separator after it dropped (`approve 3f9a1c: ok`)."""
    word = normalize_prefix(ref.strip().rstrip(":,;.!"))
    return word if word is not None and len(word) >= MIN_RUN_WORD else None


def _decided_here(ctx: Context, ref: str) -> Run | list[tuple[Run, Gate]]:
    """The run `approve <ref> …` / `reject <ref> …` decides: when `ref` reads as a run id
    (`run_word`), the run it names (a unique prefix; of several, `AmbiguousRunId` asks for
    more; of none, `RunNotFound`: never a gate that happens to wait here); else the gates
    waiting where the command was typed (the run's thread, or the conversation): `ref` was
    the first word of the comment or reason. `RunNotFound` when none waits there."""
    named = run_word(ref)
    if named is not None:  # a run's id, never a comment's first word: no gate here instead
        return ctx.find(named)
    msg = ctx.message
    waiting = ctx.store.gates.waiting_gates(platform=msg.platform, conversation=msg.conversation,
                                            thread=msg.thread)  # fmt: skip
    if not waiting:
        raise _not_found(ref)
    if len(waiting) == 1:  # the command's audit row names the run it decided
        ctx.run_ref = waiting[0][0].id
        if ctx.pending_audit is not None and ctx.pending_audit.get("run_id") is None:
            ctx.pending_audit["run_id"] = ctx.run_ref
    return waiting


async def _announcing(ctx: Context, run_id: str, ending: Awaitable[Run]) -> Run:
    """Await a cancellation whose reply this command gives (the background one is skipped)."""
    ctx.announced.add(run_id)
    try:
        return await ending
    except BaseException:
        ctx.announced.discard(run_id)
        raise


async def abandon(ctx: Context, cmd: AbandonCommand) -> list[Reply]:
    target = ctx.find(cmd.run)
    authz.require_owner(ctx.access, ctx.uid, target, "abandon")
    done = await _announcing(ctx, target.id, ctx.engine.abandon(target.id, actor=ctx.uid, reason=cmd.reason))
    return [replies.run_cancelled(done, ctx.uid, cmd.reason)]


async def cancel(ctx: Context, cmd: CancelCommand) -> list[Reply]:
    target = ctx.find(cmd.run)
    authz.require_owner(ctx.access, ctx.uid, target, "cancel")
    done = await _announcing(ctx, target.id, ctx.engine.cancel(target.id, actor=ctx.uid))
    return [replies.run_cancelled(done, ctx.uid, None)]


async def resolve(ctx: Context, cmd: ResolveCommand) -> list[Reply]:
    target = ctx.find(cmd.run)
    authz.require_owner(ctx.access, ctx.uid, target, "resolve steps of")
    after = await ctx.engine.resolve(target.id, cmd.node, cmd.action, actor=ctx.uid, output=cmd.output)
    return [replies.node_resolved(after, cmd.node, cmd.action, ctx.uid)]


async def invalidate(ctx: Context, cmd: InvalidateCommand) -> list[Reply]:
    target = ctx.find(cmd.run)
    authz.require_owner(ctx.access, ctx.uid, target, "invalidate results of")
    nodes = ctx.engine.invalidate(target.id, cmd.node, downstream=cmd.downstream, actor=ctx.uid)
    return [replies.invalidated(ctx.store.runs.get_run(target.id), nodes, cmd.downstream)]


async def plan(ctx: Context, cmd: PlanCommand) -> list[Reply]:
    target = ctx.find(cmd.run)
    ctx.require_view(target)
    return [replies.plan(target, ctx.engine.plan(target.id))]


def _named_or_latest(ctx: Context, ref: str | None) -> Run:
    """The run `ref` names, else the latest run of this thread, else of this conversation."""
    msg = ctx.message
    if ref is not None:
        target: Run | None = ctx.find(ref)
    else:
        here = ctx.store.runs.runs_in_thread(msg.platform, msg.conversation, msg.thread) if msg.thread else []
        target = latest_run(here) or latest_run(
            ctx.store.runs.recent_runs(platform=msg.platform, conversation=msg.conversation, limit=1))
    if target is None:
        raise RunNotFound("No runs here yet.", hint="Start one with `/workflow run <name>`.")
    return target


async def status(ctx: Context, cmd: StatusCommand) -> list[Reply]:
    target = _named_or_latest(ctx, cmd.run)
    ctx.require_view(target)
    queue = queueing.waiting(ctx.store, target, ctx.clock())  # a queued run: why it waits, behind whom
    return [replies.status(target, ctx.engine.summary(target), queue)]


async def queue(ctx: Context, cmd: QueueCommand) -> list[Reply]:
    """The active and queued runs of a key, of a workflow's keys, or of every key; only the
    runs the user may view."""
    target = cmd.target
    runs = ctx.store.views.key_runs()
    if target is not None:
        by_key = [r for r in runs if r.concurrency is not None and r.concurrency.key == target]
        runs = by_key or [r for r in runs if r.workflow == target]
        if not runs and target not in ctx.catalog.names():
            keys = {r.concurrency.key for r in ctx.store.views.key_runs() if r.concurrency is not None}
            guess = did_you_mean(target, keys | set(ctx.catalog.names()))
            raise UsageError(f"no workflow or concurrency key `{target}` has runs active or queued"
                             + (f"; did you mean `{guess}`?" if guess else ""),
                             hint="`/workflow queue` lists every key with runs active or queued.")
    visible = [r for r in runs if ctx.may_view(r)]
    return [replies.queue(queueing.listing(ctx.store, visible, ctx.clock()), target)]


def _pages(ctx: Context) -> RunPages:
    if ctx.pages is None:
        raise ConfigurationError(
            "Run pages are turned off on this Baton.",
            hint="Ask its operator to set BATON_WEB_PORT; meanwhile `/workflow status <run>` shows it.",
        )
    return ctx.pages


async def open_(ctx: Context, cmd: OpenCommand) -> list[Reply]:
    """The asking user's own link to a run's page (ephemeral: a link acts as its user)."""
    target = _named_or_latest(ctx, cmd.run)
    ctx.require_view(target)
    return [replies.page_link(_pages(ctx).run_link(target, ctx.uid), ctx.uid, target)]


async def runs(ctx: Context, cmd: RunsCommand) -> list[Reply]:
    msg = ctx.message
    if cmd.open:
        link = _pages(ctx).runs_link(msg.platform, msg.conversation, ctx.uid)
        return [replies.page_link(link, ctx.uid, platform=msg.platform, conversation=msg.conversation)]
    recent = ctx.store.runs.recent_runs(platform=msg.platform, conversation=msg.conversation, limit=20,
                                        workflow=cmd.workflow, status=cmd.status)
    return [replies.runs([r for r in recent if ctx.may_view(r)])]


async def list_workflows(ctx: Context, cmd: ListCommand) -> list[Reply]:
    available: list[dict[str, Any]] = []
    broken: list[dict[str, Any]] = []
    for entry in ctx.catalog.entries():
        if not authz.may_run(ctx.access, ctx.uid, entry.name):
            continue
        problem: BatonError | None = entry.error
        if problem is None and entry.workflow is not None:
            problem = unregistered(entry.workflow, ctx.engine.tools)
        if entry.workflow is not None and problem is None:
            available.append({"name": entry.name, "description": entry.workflow.description,
                              "inputs": sorted(entry.workflow.inputs),
                              "unmet": voting.unmet(ctx.access, entry.workflow)})
        else:
            error = problem.message if problem else "could not be loaded"
            broken.append({"name": entry.name, "path": str(entry.path), "error": error,
                           "hint": problem.hint if problem else ""})
    return [replies.workflows(available, broken)]


async def args(ctx: Context, cmd: ArgsCommand) -> list[Reply]:
    target = ctx.find(cmd.run)
    ctx.require_view(target)
    canonical = canonical_json(ctx.engine.args_of(target)).decode("utf-8")
    return [replies.args(target, canonical)]


async def audit(ctx: Context, cmd: AuditCommand) -> list[Reply]:
    if cmd.run is None:  # `audit --since 7d`: every run's trail, as a file, for admins only
        seconds = audit_export.window(cmd.since or "")
        if not authz.is_admin(ctx.access, ctx.uid):
            raise PermissionDenied(
                f"Only a Baton admin may export the workspace's audit; {ctx.uid} is not one.",
                users=[ctx.uid], hint="Ask an admin, or use `/workflow audit <run>` for one run.")
        now = ctx.clock()
        events = ctx.store.events.audit_since(now - seconds)
        name = audit_export.filename(cmd.format, now)
        content = audit_export.export(events, cmd.format, ctx.redactor)
        return [replies.audit_export(len(events), cmd.since or "", cmd.format, name, content)]
    target = ctx.find(cmd.run)
    ctx.require_view(target)
    return [replies.audit(target, ctx.store.events.audit_log(target.id))]


async def who(ctx: Context, cmd: WhoCommand) -> list[Reply]:
    """Who decided each gate of the run, with every vote cast on its latest opening."""
    target = ctx.find(cmd.run)
    ctx.require_view(target)
    gates = [(g, ctx.store.ballots.gate_votes(target.id, g.node_id, g.created_at))
             for g in ctx.store.gates.run_gates(target.id)]  # fmt: skip
    return [replies.who_approved(target, gates)]


async def pin(ctx: Context, cmd: PinCommand | UnpinCommand) -> list[Reply]:
    """Exempt a run from pruning (or give it back); the owner and admins may."""
    target = ctx.find(cmd.run)
    pinning = isinstance(cmd, PinCommand)
    authz.require_owner(ctx.access, ctx.uid, target, "pin" if pinning else "unpin")
    changed = ctx.store.retention.pin_run(
        target.id, ctx.uid
    ) if pinning else ctx.store.retention.unpin_run(target.id)
    if changed:
        ctx.store.events.audit(actor=ctx.uid, action="pin" if pinning else "unpin", run_id=target.id)
    return [replies.pinned(target, pinned=pinning, changed=changed)]


async def help_(ctx: Context, cmd: HelpCommand) -> list[Reply]:
    if cmd.topic is None:
        return [replies.help_list([s for s in SPECS.values() if authz.may_use(ctx.access, ctx.uid, s.name)])]
    if not authz.may_use(ctx.access, ctx.uid, cmd.topic):
        raise PermissionDenied(f"`/workflow {cmd.topic}` is not available to {ctx.uid}.", users=[ctx.uid])
    return [replies.help_topic(SPECS[cmd.topic])]


Action = Callable[[Context, Any], Awaitable[list[Reply]]]


ACTIONS: dict[type, Action] = {
    RunCommand: run, ResumeCommand: resume, ApproveCommand: approve, RejectCommand: reject,
    AbandonCommand: abandon, CancelCommand: cancel, ResolveCommand: resolve,
    InvalidateCommand: invalidate, PlanCommand: plan, StatusCommand: status, RunsCommand: runs,
    OpenCommand: open_, QueueCommand: queue,
    ListCommand: list_workflows, ArgsCommand: args, AuditCommand: audit, HelpCommand: help_,
    WhoCommand: who, PinCommand: pin, UnpinCommand: pin, ScheduleCommand: schedule_actions.schedule,
}  # and `subscribing.ACTIONS` (built on this module's `Context`)


def run_of(command: Command) -> str | None:
    """The run id (or prefix) a command names, for the audit trail."""
    return (getattr(command, "run", None) or getattr(command, "resume_from", None)
            or getattr(command, "replace", None))
