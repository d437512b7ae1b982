"""A person's home: their recent runs and the gates waiting for their decision, in every
conversation of a platform (Slack's App Home), kept current while they look at it.

`view(platform, user)` is the reply to show (kind `home`), with that person's own links to the
run pages (it is shown to them alone). A platform that has homes registers a publisher;
`opened(platform, user)` answers the person's look and remembers them as a watcher. Engine
events about a run of that platform (started, at rest, a gate decided) refresh the watchers
whose home shows it: its requester and whoever may decide its gates. Refreshes are coalesced
per person (at most one per `interval`, the newest state always shown).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.commands import authz, replies
from core.commands.messages import Reply
from core.commands.pages import RunPages
from core.config import Access
from core.engine.events import EngineEvent, EventKind
from core.errors import BatonError, WorkflowError
from core.store.port import Gates, Runs
from core.store.records import Run
from core.workflows.catalog import Catalog

log = logging.getLogger("baton.home")

Publisher = Callable[[str, Reply], Awaitable[None]]  # (the platform's user id, the home to show)
RUNS_SHOWN = 10
GATES_SHOWN = 10
WATCHERS = 1_000  # people whose home is kept current, per process (the most recent lookers)
_REFRESHING = frozenset({EventKind.RUN_STARTED, EventKind.RUN_FINISHED, EventKind.GATE_DECIDED})


@dataclass
class _Watch:
    task: asyncio.Task[None] | None = None
    due: bool = False  # a refresh was asked for while one was being sent
    last: float = float("-inf")  # loop time of the last refresh sent


class HomeStore(Protocol):
    """The store roles a person's home reads."""

    @property
    def runs(self) -> Runs: ...
    @property
    def gates(self) -> Gates: ...


@dataclass
class Homes:
    store: HomeStore
    catalog: Catalog
    access: Access
    pages: RunPages | None = None
    interval: float = 1.0
    _publishers: dict[str, Publisher] = field(default_factory=dict)
    _watchers: dict[str, OrderedDict[str, _Watch]] = field(default_factory=dict)

    def register(self, platform: str, publish: Publisher) -> None:
        self._publishers[platform] = publish
        self._watchers.setdefault(platform, OrderedDict())

    def opened(self, platform: str, user: str) -> Reply:
        """`user` looks at their home: the view, and they are kept current from now on."""
        watchers = self._watchers.setdefault(platform, OrderedDict())
        watchers.setdefault(user, _Watch())
        watchers.move_to_end(user)
        idle = [u for u, w in watchers.items() if w.task is None or w.task.done()]  # oldest first
        for old in idle[: max(0, len(watchers) - WATCHERS)]:
            del watchers[old]
        return self.view(platform, user)

    def view(self, platform: str, user: str) -> Reply:
        uid = authz.user_id(platform, user)
        runs = self.store.runs.recent_runs(platform=platform, requester=uid, limit=RUNS_SHOWN)
        gates = [(r, g) for r, g in self.store.gates.waiting_gates_on(platform)
                 if authz.may_approve(self.access, uid, r, _approvers(self.catalog, r, g.node_id))]
        shown = [*runs, *(r for r, _ in gates[:GATES_SHOWN])]
        conversations = list(dict.fromkeys(r.conversation for r in shown))
        return replies.home(
            uid, [self._run(r, uid) for r in runs],
            [{**self._run(r, uid), "node": g.node_id, "question": g.prompt} for r, g in gates[:GATES_SHOWN]],
            max(0, len(gates) - GATES_SHOWN),
            [{"conversation": c, "url": self._list_url(platform, c, uid)} for c in conversations],
            pages=self.pages is not None)

    def _run(self, run: Run, uid: str) -> dict[str, Any]:
        url = self.pages.run_link(run, uid).url if self.pages is not None else None
        return {"run_id": run.id, "workflow": run.workflow, "status": str(run.status),
                "conversation": run.conversation, "created_at": run.created_at, "url": url}

    def _list_url(self, platform: str, conversation: str, uid: str) -> str | None:
        return self.pages.runs_link(platform, conversation, uid).url if self.pages is not None else None

    # -- keeping homes current ---------------------------------------------------------------
    async def on_event(self, event: EngineEvent) -> None:
        """An engine subscriber: only takes note; the refreshes run in tasks of their own."""
        if event.kind not in _REFRESHING or not any(self._watchers.values()):
            return  # nobody looks at a home in this process: not even the run is read
        try:
            run = self.store.runs.get_run(event.run_id)
        except BatonError:
            return
        watchers = self._watchers.get(run.platform)
        if not watchers:
            return
        for user, watch in watchers.items():
            if self._concerns(run, user):
                self._refresh(run.platform, user, watch)

    def _concerns(self, run: Run, user: str) -> bool:
        """Whether `user`'s home may show `run`: they asked for it, or may decide a gate of it
        (one may just have opened, or been decided)."""
        uid = authz.user_id(run.platform, user)
        approvers = workflow_approvers(self.catalog, run)
        return run.requester == uid or authz.may_approve(self.access, uid, run, approvers)

    def _refresh(self, platform: str, user: str, watch: _Watch) -> None:
        if watch.task is not None and not watch.task.done():
            watch.due = True
            return
        watch.task = asyncio.create_task(self._publish(platform, user, watch), name=f"home-{platform}-{user}")

    async def _publish(self, platform: str, user: str, watch: _Watch) -> None:
        loop = asyncio.get_running_loop()
        while True:
            pause = watch.last + self.interval - loop.time()  # at most one refresh per interval
            if pause > 0:
                await asyncio.sleep(pause)
            watch.due, watch.last = False, loop.time()
            try:
                await self._publishers[platform](user, self.view(platform, user))
            except Exception:
                log.exception("home not refreshed", extra={"action": "home_refresh", "platform": platform})
            if not watch.due:
                return

    async def drain(self) -> None:
        """Wait until every refresh asked for so far was sent."""
        for watchers in self._watchers.values():
            tasks = [w.task for w in watchers.values() if w.task is not None and not w.task.done()]
            with contextlib.suppress(Exception):
                await asyncio.gather(*tasks)


def _approvers(catalog: Catalog, run: Run, node_id: str) -> list[str] | None:
    try:
        return catalog.get(run.workflow).node(node_id).approvers
    except (WorkflowError, KeyError):
        return None


def workflow_approvers(catalog: Catalog, run: Run) -> list[str] | None:
    """Everyone any gate of the run's workflow names (None: the settings decide)."""
    try:
        gates = [n.approvers for n in catalog.get(run.workflow).nodes if n.kind == "approval"]
    except WorkflowError:
        return None
    if not gates or any(a is None for a in gates):
        return None
    return [person for approvers in gates for person in approvers or ()]
