"""Pure `Reply` builders of the schedule commands and of what schedules do by themselves
(data, never sentences: `templates/<platform>/schedule_*.j2` hold the words)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from core.commands.messages import Reply
from core.commands.replies import told_directly
from core.commands.resolution import preview
from core.delivery.envelope import Address, Mode
from core.store.records import Fire, Run, Schedule
from core.workflows.args import canonical_json
from core.workflows.schedule_rules import Rule, local_time

KINDS = (
    "schedule_added",
    "schedules",
    "schedule_shown",
    "schedule_changed",
    "schedule_fired",
    "schedule_refused",
)


def _rule(s: Schedule) -> Rule:
    return Rule(cron=s.cron, every=s.every, timezone=s.timezone, anchor=s.created_at)


def schedule_data(s: Schedule) -> dict[str, Any]:
    """What every schedule reply may show of it."""
    return {
        "id": s.id,
        "workflow": s.workflow,
        "source": s.source,
        "rule": _rule(s).text,
        "timezone": s.timezone,
        "overlap": s.overlap,
        "catchup": s.catchup,
        "paused": s.paused,
        "note": s.note,
        "paused_by": s.paused_by,
        "principal": s.principal,
        "owner": s.owner,
        "place": f"{s.platform}:{s.conversation}",
        "platform": s.platform,
        "conversation": s.conversation,
    }


def _message(s: Schedule) -> dict[str, Any]:
    message = s.args.get("message")
    return {"message": preview(message) if isinstance(message, str) else None}


def shown_args(s: Schedule, redact: Callable[[str], str]) -> str | None:
    """Its arguments but the message (shown on its own) as compact JSON, redacted before it is
    cut (a cut secret would no longer be found); None when there are none."""
    rest = {k: v for k, v in s.args.items() if not (k == "message" and isinstance(v, str))}
    return preview(redact(canonical_json(rest).decode("utf-8"))) if rest else None


def added(s: Schedule, now: float, args: str | None = None) -> Reply:
    """`args`: `shown_args`."""
    nxt = _rule(s).next_fires(now, 1)
    return Reply(
        kind="schedule_added",
        data={
            **schedule_data(s),
            **_message(s),
            "args": args,
            "words": _rule(s).describe(),
            "next": local_time(nxt[0], s.timezone) if nxt else None,
        },
    )


def listed(schedules: Sequence[Schedule], now: float) -> Reply:
    rows = []
    for s in schedules:
        nxt = [] if s.paused else _rule(s).next_fires(now, 1)
        rows.append({**schedule_data(s), "next": local_time(nxt[0], s.timezone) if nxt else None})
    return Reply(kind="schedules", how=Mode(ephemeral=True), data={"schedules": rows})


def shown(s: Schedule, fires: Sequence[Fire], now: float, args: str | None = None) -> Reply:
    """`schedule show`: the rule in words, the next five fires in its zone, the last fires;
    `args`: `shown_args`."""
    rule = _rule(s)
    nxt = [local_time(t, s.timezone) for t in rule.next_fires(now, 5)]
    last = [{"due": local_time(f.due_at, s.timezone), "outcome": f.outcome.value, "run_id": f.run_id,
             "detail": f.detail} for f in fires]  # fmt: skip
    return Reply(
        kind="schedule_shown",
        how=Mode(ephemeral=True),
        data={**schedule_data(s), **_message(s), "args": args, "words": rule.describe(), "next": nxt,
              "fires": last},
    )


def changed(
    s: Schedule,
    action: str,
    by: str,
    *,
    run: Run | None = None,
    outcome: str | None = None,
    detail: dict[str, Any] | None = None,
    queue: Mapping[str, Any] | None = None,
) -> Reply:
    """paused | resumed | removed | fired (by hand: `outcome` and the run it started, with its
    status: a console one-shot drives a moving run to rest, and leaves a queued one queued).
    `queue`: the run waits in the schedule's queue (`queueing.waiting`): said, and behind whom."""
    return Reply(
        kind="schedule_changed",
        run_id=run.id if run else None,
        run_status=str(run.status) if run else None,
        data={
            **schedule_data(s),
            "action": action,
            "by": by,
            "run_id": run.id if run else None,
            "outcome": outcome,
            "detail": detail or {},
            "queue": dict(queue) if queue else None,
        },
    )


def fired(run: Run, s: Schedule, due: float, detail: dict[str, Any]) -> Reply:
    """The message a scheduled run's thread starts from, where the schedule reports."""
    return Reply(
        kind="schedule_fired",
        run_id=run.id,
        run_status=str(run.status),
        to=Address(run.platform, run.conversation, requester=run.requester),
        how=Mode(starts_thread=True),
        data={
            **schedule_data(s),
            "run_id": run.id,
            "status": str(run.status),  # queued: it waits behind an active run of the schedule
            "workflow": run.workflow,
            "due": local_time(due, s.timezone),
            "detail": detail,
        },
    )


def refused(s: Schedule, note: str) -> list[Reply]:
    """The notice of a schedule paused because its principal may no longer run the workflow:
    in its place, and to its owner directly."""
    notice = Reply(
        kind="schedule_refused",
        to=Address(s.platform, s.conversation),
        data={**schedule_data(s), "reason": note},
    )
    out = [notice]
    if s.owner:
        direct = told_directly(notice, s.owner)
        place = (s.platform, s.conversation)
        if direct is not None and (direct.to.platform, direct.to.conversation) != place:
            out.append(dataclasses.replace(direct, data={**direct.data, "reason": note}))
    return out
