"""The run pages, as the conversation sees them: a port that makes personal links.

A link to a run's page (or to a conversation's list of runs) is signed for one user and
expires: whoever holds it acts as that user on the page. So a link is only ever shown to
the person it was made for: in an ephemeral reply to their own `open` (typed, or the
"Open run" button, which every viewer of a shared message clicks for themselves) or
`runs --open`. A shared channel message never carries a link, only the button.

The implementation is the web adapter's (`adapters.web.links.PageLinks`); the handler gets
one when `BATON_WEB_PORT` is not off, else None and `open` says the pages are off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from core.commands.messages import Button
from core.store.records import Run


def open_button(run_id: str) -> Button:
    """"Open run": each person who clicks it gets their own link, in a reply only they see
    (the button stays for the next person: `messages.REUSABLE_ACTIONS`)."""
    return Button("Open run", f"open {run_id}", None, "open")


@dataclass(frozen=True, slots=True)
class PageLink:
    url: str
    expires_at: float  # epoch seconds
    ttl: float  # seconds it works from when it was made


class RunPages(Protocol):
    def run_link(self, run: Run, uid: str) -> PageLink:
        """A link to `run`'s page that works for `uid` only, until it expires."""

    def runs_link(self, platform: str, conversation: str, uid: str) -> PageLink:
        """A link to the recent runs of that conversation, for `uid` only."""
