"""Where a background reply goes when the run's place refuses it, for every platform.

The order is the product's (docs/DESIGN "Delivery"): the run's usual places (Discord: its
thread, then its channel; Slack: its thread in its channel), then the follow-up of the command
that started the run while it lives (a Discord interaction webhook, a Slack response URL), then
a direct message to whoever started it. The first reply in a new place says so, once; later
replies go straight there (`Edits.moved`). Progress edits of a run still moving are not posted
through a follow-up (each would be a new message, and a Slack response URL takes 5): the next
state-carrying reply is.

The adapter says how to send at a place (`send_at`) and what a refusal is (`Refused`); the
words of the "it reports here now" notice are its own too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from core.delivery.edits import Edits, Outgoing, urgent

FOLLOW_UP = "follow_up"  # the interaction's follow-up, while it lives
DIRECT = "direct"  # a direct message to the run's requester

#: Sends `reply` at a place; `moving`: the first reply there, which says where the run reports
#: now. False (or `Refused`): that place cannot take it, the next one is tried.
SendAt = Callable[[str, bool], Awaitable[bool]]


class Refused(Exception):
    """This place will not take the reply (deleted, no access, the bot removed): the next one."""


async def along(edits: Edits, platform: str, reply: Outgoing, usual: Sequence[str], send_at: SendAt) -> bool:
    """Send `reply` at the first place that takes it; whether one did."""
    places = list(dict.fromkeys(p for p in usual if p))
    if reply.run_id:
        places += [FOLLOW_UP, DIRECT]
    elif reply.to.requester and urgent(reply):  # a notice to a subscribed place: its subscriber
        places += [DIRECT]
    moved = edits.moved(platform, reply.run_id)
    if moved is not None:
        places = places[places.index(moved):] if moved in places else [moved]
    for index, place in enumerate(places):
        if place == FOLLOW_UP:
            if edits.follow_up_of(platform, reply.run_id, use=False) is None:
                continue  # none, expired or used up
            if not urgent(reply):
                return True  # left to the next state-carrying reply
        moving = index > 0 and reply.run_id is not None
        if moving:  # before sending: a progress message is posted anew there, not edited; only
            # the first of the run's replies arriving there says so (others were on their way)
            moving = edits.move(platform, reply.run_id or "", place)
        try:
            if await send_at(place, moving):
                return True
        except Refused:
            if reply.how.edit_only:
                return False  # only an edit of a message there (a decided gate's): nothing to move
    return False
