"""`subscribe`, `unsubscribe`, `subscriptions`: which conversations hear about a workflow's runs.

A person may subscribe a conversation they are in (the one the command is typed in) to the
runs of a workflow whose runs they may view (`authz.may_view_workflow`; `*`: every workflow,
for those who may view them all); an admin may name another place with `--to`. The
subscription rests on its creator's right: a notice finds it gone and stops the subscription
with a notice (`notices.py`). Every change is audited.
"""

from __future__ import annotations

from core.commands import authz, replies
from core.commands.actions import Action, Context
from core.commands.messages import Reply
from core.commands.model import SPECS, SubscribeCommand, SubscriptionsCommand, UnsubscribeCommand
from core.errors import PermissionDenied, UsageError
from core.workflows.notify_spec import CLASSES, DEFAULT_CLASSES, address_hint, parse_address

ANY_WORKFLOW = "*"


def events_of(classes: tuple[str, ...]) -> list[str]:
    """The events the words stand for (none: the default classes), in the order of `EVENTS`."""
    wanted = {e for c in classes or DEFAULT_CLASSES for e in CLASSES[c]}
    return [e for e in CLASSES["all"] if e in wanted]


def _place(ctx: Context, to: str | None, sub: str) -> tuple[str, str]:
    """Where the command acts: this conversation, or (admins only) the place `--to` names."""
    here = (ctx.message.platform, ctx.message.conversation)
    if to is None:
        return here
    place = parse_address(to)
    if place is None:
        raise UsageError(f"`--to {to}` is not a conversation", usage=f"/workflow {SPECS[sub].usage}",
                         hint=address_hint())
    if place != here and not authz.is_admin(ctx.access, ctx.uid):
        raise PermissionDenied(
            f"Only a Baton admin may act on another conversation's subscriptions; {ctx.uid} is not one.",
            users=[ctx.uid], hint=f"Type `/workflow {sub}` in that conversation instead.")
    return place


def _require_view(ctx: Context, workflow: str) -> None:
    if workflow != ANY_WORKFLOW:
        ctx.catalog.get(workflow)  # UnknownWorkflow, with the closest name
    if not authz.may_view_workflow(ctx.access, ctx.uid, workflow):
        what = "every workflow's runs" if workflow == ANY_WORKFLOW else f"the runs of `{workflow}`"
        raise PermissionDenied(
            f"{ctx.uid} may not view {what}, so may not subscribe to them.", users=[ctx.uid],
            hint="Ask a Baton admin to grant you access, or to subscribe.")


async def subscribe(ctx: Context, cmd: SubscribeCommand) -> list[Reply]:
    platform, conversation = _place(ctx, cmd.to, "subscribe")
    _require_view(ctx, cmd.workflow)
    events = events_of(cmd.classes)
    rows = ctx.store.subscribers.subscribe(platform, conversation, cmd.workflow, events, by=ctx.uid)
    ctx.store.events.audit(actor=ctx.uid, action="subscribe", details={
        "platform": platform, "conversation": conversation, "workflow": cmd.workflow, "events": events})
    return [replies.subscribed(platform, conversation, cmd.workflow, [r.event for r in rows], ctx.uid)]


async def unsubscribe(ctx: Context, cmd: UnsubscribeCommand) -> list[Reply]:
    platform, conversation = _place(ctx, cmd.to, "unsubscribe")
    events = events_of(cmd.classes) if cmd.classes else None
    gone = ctx.store.subscribers.unsubscribe(platform, conversation, cmd.workflow, events)
    ctx.store.events.audit(actor=ctx.uid, action="unsubscribe", details={
        "platform": platform, "conversation": conversation, "workflow": cmd.workflow, "events": events,
        "removed": gone})
    left = ctx.store.subscribers.subscriptions(platform=platform, conversation=conversation)
    return [replies.unsubscribed(platform, conversation, cmd.workflow, events, gone, len(left))]


async def subscriptions(ctx: Context, cmd: SubscriptionsCommand) -> list[Reply]:
    platform, conversation = _place(ctx, cmd.to, "subscriptions")
    rows = ctx.store.subscribers.subscriptions(platform=platform, conversation=conversation)
    rules = []
    for entry in ctx.catalog.entries():  # the workflows' own `notify:` rules that send here
        for rule in entry.workflow.notify if entry.workflow is not None else ():
            if parse_address(rule.to) == (platform, conversation):
                rules.append({"workflow": entry.name, "events": list(rule.on), "when": rule.when or ""})
    return [replies.subscriptions(platform, conversation, rows, rules)]


ACTIONS: dict[type, Action] = {
    SubscribeCommand: subscribe, UnsubscribeCommand: unsubscribe, SubscriptionsCommand: subscriptions,
}
