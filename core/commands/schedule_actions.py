"""`schedule add|list|show|pause|resume|run|rm`: authorize, change the store, build replies.

- `add` needs the right to run the workflow; the schedule runs as the person who added it
  (checked again at every fire) and reports in the conversation where it was added.
- `list` and `show` list the schedules of workflows the person may run (admins: all).
- `pause`, `resume`, `run`, `rm`: the schedule's owner and admins (a workflow's YAML
  schedules have no owner: admins); a schedule one may not see is not found, as in `show`.
  A YAML schedule is removed from its file, not in chat, whoever asks.
Every change is a compare-and-swap on the schedule's version and is audited. All but `add`
first sync the workflow files' schedules into the store (`Scheduler.sync`): a process whose
scheduler has not ticked (a one-shot `baton say`) sees them too.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from core.commands import authz, queueing, schedule_replies
from core.commands.messages import Reply
from core.commands.model import SPECS, ScheduleCommand
from core.commands.run_args import build_args
from core.errors import PermissionDenied, ScheduleNotFound, UsageError
from core.store.records import Schedule
from core.workflows.args import check_typed_keys, validate_inputs
from core.workflows.schedule_rules import Rule, RuleError
from core.workflows.schedule_spec import DEFAULT_WINDOW

if TYPE_CHECKING:
    from core.commands.actions import Context

USAGE = f"/workflow {SPECS['schedule'].usage}"


def _usage(message: str, hint: str | None = None) -> UsageError:
    return UsageError(message, usage=USAGE, hint=hint)


def _found(ctx: Context, schedule_id: str) -> Schedule:
    try:
        return ctx.store.schedules.get_schedule(schedule_id)
    except ScheduleNotFound as exc:
        raise ScheduleNotFound(
            exc.message, schedule_id=schedule_id, hint="`/workflow schedule list` shows the schedules' ids."
        ) from None


def _may_see(ctx: Context, s: Schedule) -> bool:
    return (
        authz.is_admin(ctx.access, ctx.uid)
        or s.owner == ctx.uid
        or authz.may_run(ctx.access, ctx.uid, s.workflow)
    )


def _file_of(ctx: Context, s: Schedule) -> str:
    """The file that declares a YAML schedule (its workflow's)."""
    entry = next((e for e in ctx.catalog.entries() if e.name == s.workflow), None)
    return str(entry.path) if entry is not None else f"workflow `{s.workflow}`'s file"


def _require_manage(ctx: Context, s: Schedule, what: str) -> None:
    if authz.is_admin(ctx.access, ctx.uid) or (s.owner is not None and s.owner == ctx.uid):
        return
    if s.owner is not None:
        raise PermissionDenied(
            f"Only its owner ({s.owner}) or an admin may {what} schedule {s.id}; {ctx.uid} may not.",
            users=[ctx.uid, s.owner],
            hint="Ask its owner or an admin.",
        )
    # a workflow file's schedule has no owner: admins manage it in chat, whoever edits the file there
    file = _file_of(ctx, s)
    instead = (  # here anyone who may see it may run its workflow (`_may_see`)
        f"run its workflow yourself (`/workflow run {s.workflow}`), or change its rule in {file}"
        if what == "fire"
        else f"change or remove it in {file}"
    )
    raise PermissionDenied(
        f"Schedule {s.id} is declared in its workflow's file: only an admin may {what} it; "
        f"{ctx.uid} is not one.",
        users=[ctx.uid],
        hint=f"Ask an admin, or {instead}."
        if ctx.access.admins
        else f"No Baton admin is configured (BATON_ACCESS `admins`): {instead}.",
    )


async def schedule(ctx: Context, cmd: ScheduleCommand) -> list[Reply]:
    if cmd.action == "add":
        return [_add(ctx, cmd)]
    if ctx.scheduler is not None:  # the workflow files' schedules, also where nothing ticked yet
        ctx.scheduler.sync()  # (a one-shot `baton say`); syncing fires nothing
    if cmd.action == "list":
        mine = [s for s in ctx.store.schedules.list_schedules() if _may_see(ctx, s)]
        return [schedule_replies.listed(mine, ctx.clock())]
    s = _found(ctx, cmd.target or "")
    if not _may_see(ctx, s):  # as for a schedule that does not exist
        raise ScheduleNotFound(f"No schedule has the id {s.id}.", schedule_id=s.id)
    if cmd.action == "show":
        fires = ctx.store.schedules.schedule_fires(s.id, 10)
        args = schedule_replies.shown_args(s, ctx.redactor.redact)
        return [schedule_replies.shown(s, fires, ctx.clock(), args)]
    if cmd.action == "rm" and s.source == "yaml":  # not in chat, whoever asks: the file would bring it back
        raise _usage(
            f"schedule {s.id} is declared in workflow `{s.workflow}`'s file: it is removed there, "
            "not in chat",
            hint=f"Remove it from `schedules:` in {_file_of(ctx, s)}"
            + (", or pause it here." if authz.is_admin(ctx.access, ctx.uid) else "."),
        )
    verb = {"pause": "pause", "resume": "resume", "run": "fire", "rm": "remove"}[cmd.action]
    _require_manage(ctx, s, verb)
    if cmd.action == "pause":
        changed = ctx.store.schedules.change_schedule(s, paused=True, note=cmd.note, paused_by=ctx.uid)
    elif cmd.action == "resume":  # fires due while it was paused are not caught up: it was told not to
        changed = ctx.store.schedules.change_schedule(
            s, paused=False, note=None, paused_by=None, evaluated_until=max(s.evaluated_until, ctx.clock())
        )
    elif cmd.action == "rm":
        ctx.store.schedules.remove_schedule(s)
        changed = s
    else:
        return [await _fire_now(ctx, s)]
    ctx.store.events.audit(
        actor=ctx.uid,
        action=f"schedule_{cmd.action}",
        details={"schedule": s.id, "workflow": s.workflow, "note": cmd.note},
    )
    if ctx.scheduler is not None:
        ctx.scheduler.changed()
    action = {"rm": "removed", "pause": "paused", "resume": "resumed"}[cmd.action]
    return [schedule_replies.changed(changed, action, ctx.uid)]


async def _fire_now(ctx: Context, s: Schedule) -> Reply:
    if ctx.scheduler is None:
        raise _usage("schedules do not fire in this process", hint="Start Baton with `baton run`.")
    now = ctx.clock()
    done = await ctx.scheduler.fire(s, now, by=ctx.uid)
    ctx.store.events.audit(
        actor=ctx.uid,
        action="schedule_run",
        details={
            "schedule": s.id,
            "workflow": s.workflow,
            "due_at": now,
            "outcome": done.outcome.value if done else None,
        },
    )
    if done is None:  # a fire at this very time was written by another replica
        raise _usage(f"schedule {s.id} fired at this moment already", hint="Try again in a second.")
    fire = next((f for f in ctx.store.schedules.schedule_fires(s.id, 5) if f.due_at == now), None)
    run = ctx.store.runs.get_run(done.run_id) if done.run_id else None
    return schedule_replies.changed(
        s,
        "fired",
        ctx.uid,
        run=run,
        outcome=done.outcome.value,
        detail=fire.detail if fire else {},
        queue=queueing.waiting(ctx.store, run, ctx.clock()) if run else None,  # overlap `queue`
    )


def _add(ctx: Context, cmd: ScheduleCommand) -> Reply:
    authz.require_run(ctx.access, ctx.uid, cmd.target or "")
    workflow = ctx.catalog.get(cmd.target or "")
    timezone = cmd.timezone or "UTC"
    now = ctx.clock()
    try:
        rule = Rule.of(cron=cmd.cron, every=cmd.every, timezone=timezone, anchor=now)
    except RuleError as exc:
        raise _usage(exc.message, hint=exc.hint) from None
    from core.commands.actions import string_inputs  # the `run` command's argument rules

    args = build_args({}, cmd.sets, cmd.message, string_inputs(workflow))
    check_typed_keys(workflow, [s.path[0] for s in cmd.sets], args)
    validate_inputs(workflow, args)  # InputValidationError now, not at 2 a.m.
    msg = ctx.message
    for _ in range(5):
        s = Schedule(
            id=f"{workflow.name}-{secrets.token_hex(2)}",
            workflow=workflow.name,
            source="chat",
            cron=rule.cron,
            every=rule.every,
            timezone=timezone,
            args=args,
            overlap=cmd.overlap or "skip",
            catchup="latest",
            catchup_window=DEFAULT_WINDOW,
            platform=msg.platform,
            conversation=msg.conversation,
            principal=ctx.uid,
            owner=ctx.uid,
            created_at=now,
            updated_at=now,
            evaluated_until=now,
        )
        if ctx.store.schedules.add_schedule(s):
            break
    else:  # pragma: no cover - five 16-bit collisions in a row
        raise _usage("no free schedule id was found", hint="Try again.")
    ctx.store.events.audit(
        actor=ctx.uid,
        action="schedule_add",
        details={
            "schedule": s.id,
            "workflow": s.workflow,
            "rule": rule.text,
            "timezone": timezone,
            "overlap": s.overlap,
            "place": f"{s.platform}:{s.conversation}",
        },
    )
    if ctx.scheduler is not None:
        ctx.scheduler.changed()
    return schedule_replies.added(s, now, schedule_replies.shown_args(s, ctx.redactor.redact))
