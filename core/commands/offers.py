"""Messages that offer a gate's buttons, and what becomes of them once the gate is decided.

DESIGN.md: "Once a gate is decided by any route, every message that offered its buttons is
updated to show who decided it, and its buttons stop being offered."

Every reply whose buttons (or choice list) decide a gate (`gate_waiting`, `approval_question`,
`which_gate`, a fresh-run prompt offering `approve`) gets a `replace_key` before it is sent
(`offer`), and is kept in the store's `platform_state`, so that a restart forgets nothing:

    offer:<key>      the reply, as JSON
    offers:<run id>  the keys of the replies that offer that run's gate

Both are kept under the platform the reply is sent on, which need not be the run's: a
reminder reaches each person directly on their own platform (`replies.told_directly`), so a
Slack run's approver may be offered its buttons in a Discord DM.

When the engine reports a gate decided (`EventKind.GATE_DECIDED`, whatever the route: a
button, a command, a reply, an abandon), each of them goes out again through the outbox of the
platform it was sent on under the same key, `edit_only`, without that run's buttons and with a
line saying who decided (`data["settled"]`): the adapters edit the message in place (Slack
chat.update, Discord message edit). The run's platform is settled first, then each other one
this process serves; one a process does not serve keeps its buttons (a click on them is
answered that the gate is decided). A message offering several gates keeps the others' buttons.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import uuid
from collections.abc import Callable, Collection, Iterable
from typing import Any, Protocol

from core.commands.messages import Button, Menu, Outbox, Reply, reusable
from core.delivery.envelope import Address, Mode, Once
from core.engine.events import EngineEvent, EventKind
from core.errors import BatonError
from core.store.port import Gates, PlatformState, Runs

log = logging.getLogger("baton.offers")

DECIDING = frozenset({"approve", "reject"})  # the button actions that decide a gate
#: `Reply`'s envelope: kept flat in an offer's JSON, beside its content (`to_json`)
ENVELOPE = frozenset({"to", "how"})


def retires(action: str, command: str, answer: Iterable[Reply]) -> bool:
    """Whether a clicked button's message loses its buttons (shown as chosen, so they cannot be
    used twice): not when the click was refused (an error) or answered nothing (a duplicate), not
    for a reusable button (`messages.reusable`: "Open run" stays for the next person), and not
    when it decided a gate (the core edits every message that offered it, this one too)."""
    answer = list(answer)
    return (bool(answer) and not any(r.is_error for r in answer) and not reusable(action)
            and command.split(" ", 1)[0] not in DECIDING)


def decided_run(button: Button) -> str | None:
    """The run whose gate `button` decides (`approve <run>` / `reject <run>`), if it does."""
    verb, _, rest = button.command.partition(" ")
    run = rest.split(" ", 1)[0]
    return run if button.action in DECIDING and verb in DECIDING and run else None


def choices(reply: Reply) -> Iterable[Button]:
    yield from reply.buttons
    for menu in reply.menus:
        yield from menu.options


def offered_runs(reply: Reply) -> list[str]:
    """The runs whose gate this reply offers to decide, in order."""
    return list(dict.fromkeys(r for b in choices(reply) if (r := decided_run(b)) is not None))


def withdrawn(reply: Reply, run_id: str, settled: dict[str, Any]) -> Reply:
    """`reply` without the choices deciding `run_id`, and with a line saying who decided it."""
    def keep(button: Button) -> bool:
        return decided_run(button) != run_id

    menus = tuple(
        Menu(m.placeholder, opts) for m in reply.menus if (opts := tuple(filter(keep, m.options)))
    )
    data = {**reply.data, "settled": [*reply.data.get("settled", ()), settled]}
    return dataclasses.replace(reply, data=data, buttons=tuple(filter(keep, reply.buttons)),
                               menus=menus).sent(edit_only=True)


def to_json(reply: Reply) -> str:
    """`reply` as one flat JSON object: its content's fields beside its address's and its mode's
    (the shape offers were kept in before `Reply.to` and `Reply.how`, which `from_json` reads)."""
    fields = {f.name: getattr(reply, f.name) for f in dataclasses.fields(reply) if f.name not in ENVELOPE}
    fields |= {f.name: getattr(reply.to, f.name) for f in dataclasses.fields(Address)}
    fields |= {f.name: getattr(reply.how, f.name) for f in dataclasses.fields(Mode)}
    fields["buttons"] = [dataclasses.asdict(b) for b in reply.buttons]
    fields["menus"] = [{"placeholder": m.placeholder, "options": [dataclasses.asdict(b) for b in m.options]}
                       for m in reply.menus]
    fields["once"] = None if reply.how.once is None else dataclasses.asdict(reply.how.once)
    return json.dumps(fields, default=list, ensure_ascii=False)


def from_json(text: str) -> Reply:
    fields = json.loads(text)
    fields["buttons"] = tuple(Button(**b) for b in fields["buttons"])
    fields["menus"] = tuple(Menu(m["placeholder"], tuple(Button(**b) for b in m["options"]))
                            for m in fields["menus"])
    fields["pings"] = tuple(fields.get("pings") or ())  # (absent from offers kept before it existed)
    once, key = fields.get("once"), fields.pop("delivery_key", None)
    since = fields.pop("redelivery_since", None)
    if once is None and key is not None:  # an offer kept before `Reply.once` (now `Reply.how.once`)
        once = {"key": key, "since": since}
    fields["once"] = None if once is None else Once(**once)
    to = Address(**{f.name: fields.pop(f.name) for f in dataclasses.fields(Address) if f.name in fields})
    how = Mode(**{f.name: fields.pop(f.name) for f in dataclasses.fields(Mode) if f.name in fields})
    return Reply(**fields, to=to, how=how)


class OffersStore(Protocol):
    """The store roles `GateOffers` uses: the offers are kept as platform state."""

    @property
    def runs(self) -> Runs: ...
    @property
    def gates(self) -> Gates: ...
    @property
    def state(self) -> PlatformState: ...


class GateOffers:
    def __init__(self, store: OffersStore, outbox_of: Callable[[str], Outbox | None],
                 platforms: Callable[[], Collection[str]]) -> None:
        """`outbox_of(platform)`: that platform's outbox in this process, or None;
        `platforms()`: the platforms this process serves (each may hold offers of any run)."""
        self._store = store
        self._outbox_of = outbox_of
        self._platforms = platforms
        self._tasks: set[asyncio.Task[None]] = set()

    def offer(self, reply: Reply, *, platform: str, conversation: str | None, thread: str | None) -> Reply:
        """`reply` as it should be sent: when it offers a gate, with a `replace_key` (and its
        place), kept so that it can be withdrawn once the gate is decided."""
        runs = offered_runs(reply)
        if not runs or reply.how.ephemeral or reply.how.edit_only:
            return reply
        key = reply.how.replace_key or f"offer:{uuid.uuid4().hex}"
        where = reply.to.platform or platform
        to = reply.to
        reply = reply.at(platform=where, conversation=to.conversation or conversation,
                         thread=to.thread or thread).sent(replace_key=key)
        try:
            self._store.state.put_state(where, key, to_json(reply))
            for run_id in runs:
                index = f"offers:{run_id}"
                keys = json.loads(self._store.state.get_state(where, index) or "[]")
                self._store.state.put_state(where, index, json.dumps([*keys, key]))
        except BatonError as exc:  # the message still goes out; its buttons just stay
            log.warning("gate offer not kept: %s", exc.message, extra={"action": "offer", "run_id": runs[0]})
        return reply

    async def restate(self, run_id: str, platform: str, state: dict[str, Any]) -> None:
        """Edit every message waiting on `run_id`'s gate to show the policy's new `state` (a
        vote arrived: "2/3 · needs @sre · expires in 3h 12m"); its buttons stay."""
        outbox = self._outbox_of(platform)
        try:
            keys = json.loads(self._store.state.get_state(platform, f"offers:{run_id}") or "[]")
            for key in keys if outbox is not None else ():
                kept = self._store.state.get_state(platform, key)
                if kept is None:
                    continue
                reply = from_json(kept)
                if reply.kind != "gate_waiting":
                    continue
                edited = dataclasses.replace(reply, data={**reply.data, "state": state}).sent(edit_only=True)
                self._store.state.put_state(platform, key, to_json(edited))
                await outbox(edited)  # type: ignore[misc]
        except BatonError as exc:
            log.warning("gate state not shown: %s", exc.message,
                        extra={"action": "restate", "run_id": run_id})

    async def on_event(self, event: EngineEvent) -> None:
        """Engine subscriber: a decided gate withdraws its offers, in the background."""
        if event.kind is not EventKind.GATE_DECIDED:
            return
        task = asyncio.create_task(self.settle(event), name=f"offers-{event.run_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def settle(self, event: EngineEvent) -> None:
        """Edit every message that offered `event`'s gate: who decided, and no more buttons. On
        each platform it was sent on that this process serves, the run's first; one failing
        leaves the others' to be withdrawn."""
        try:
            run = self._store.runs.get_run(event.run_id)
        except BatonError as exc:
            log.warning("gate offers not withdrawn: %s", exc.message,
                        extra={"action": "settle_offers", "run_id": event.run_id})
            return
        settled = {"run_id": run.id, "workflow": run.workflow, "node": event.node_id or "",
                   "approved": bool(event.detail.get("approved")), "by": event.detail.get("by") or "",
                   "how": event.detail.get("how") or "", "decision": event.detail.get("decision") or "",
                   **self._deciders(run.id, event.node_id or "", event.detail.get("by") or "")}
        for platform in dict.fromkeys([run.platform, *self._platforms()]):
            try:
                await self._withdraw(platform, run.id, settled)
            except BatonError as exc:
                log.warning("gate offers not withdrawn on %s: %s", platform, exc.message,
                            extra={"action": "settle_offers", "run_id": run.id})
            except Exception:
                log.exception("gate offers not withdrawn on %s", platform,
                              extra={"action": "settle_offers", "run_id": run.id})

    def _deciders(self, run_id: str, node_id: str, by: str) -> dict[str, Any]:
        """Who decided the gate, every one of them (a quorum's approvers, in vote order), and
        the comment of a rejection: what the edited message's headline names."""
        try:
            gate = self._store.gates.get_gate(run_id, node_id)
        except BatonError:
            return {"approvers": [by] if by else [], "comment": ""}
        approvers = [a["user"] for a in gate.outcome.get("approvers") or () if a.get("user")]
        return {"approvers": approvers or ([by] if by else []), "comment": gate.comment or ""}

    async def _withdraw(self, platform: str, run_id: str, settled: dict[str, Any]) -> None:
        """The messages offering `run_id`'s gate on `platform`, edited through its outbox."""
        outbox = self._outbox_of(platform)
        if outbox is None:
            return  # this process does not serve that platform: its buttons stay
        index = f"offers:{run_id}"
        keys = json.loads(self._store.state.get_state(platform, index) or "[]")
        if not keys:
            return
        self._store.state.put_state(platform, index, "[]")
        for key in keys:
            kept = self._store.state.get_state(platform, key)
            if kept is None:
                continue
            edited = withdrawn(from_json(kept), run_id, settled)
            self._store.state.put_state(platform, key, to_json(edited))
            await outbox(edited)
