"""Leases: the heartbeat that keeps our runs ours, and the loop that recovers orphaned runs.

Owner ids are `f"{replica_id}:{pid}:{nonce}"`.

- Heartbeat, every `lease_seconds / 3`: one UPDATE renews every running run we hold. When
  the count differs from the runs we execute, one SELECT (`runs_leased_by(owner)`) tells
  which are no longer ours or no longer running (cancelled by another process, taken
  over): the engine stops them.
- Recovery, every `lease_seconds / 2`: `lapsed_runs()` -> `take_over` (CAS on the version
  and the lease as read: exactly one process wins) -> the engine continues the run under
  the replay rules.
- At start, runs leased by a dead process of this replica (same replica id, pid not alive)
  are taken over at once, without waiting for their lease to lapse.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
from collections.abc import Awaitable, Callable

from core.errors import RunStateError
from core.store.admission import ADMITTED_OWNER
from core.store.port import Leases, Runs
from core.store.records import Run

log = logging.getLogger("baton.engine")

RunHandler = Callable[[Run], Awaitable[None]]
#: a run taken over, and whether it was admitted from its key's queue (not orphaned)
Recovered = Callable[[Run, bool], Awaitable[None]]


#: Owner ids made in this process (an engine each): a former process that had our pid (a
#: container restarted after a kill -9 often gets the same one) made none of them.
_MADE_HERE: set[str] = set()


def new_owner(replica_id: str) -> str:
    owner = f"{replica_id}:{os.getpid()}:{secrets.token_hex(4)}"
    _MADE_HERE.add(owner)
    return owner


def owner_dead(owner: str) -> bool:
    """Whether the process behind an owner id of this host is no longer running: its pid is
    gone, or it is our pid but no engine of this process made the id (a former us)."""
    pid = owner_pid(owner)
    if pid is None:
        return False
    if pid == os.getpid():
        return owner not in _MADE_HERE
    return not pid_alive(pid)


def owner_pid(owner: str | None) -> int | None:
    """The pid inside an owner id, or None when it is not one of ours."""
    if not owner:
        return None
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return int(parts[1])


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, belongs to someone else
        return True
    return True


class LeaseKeeper:
    def __init__(
        self,
        *,
        runs: Runs,
        leases: Leases,
        owner: str,
        replica_id: str,
        lease_seconds: float,
        active: Callable[[], set[str]],
        lost: RunHandler,
        recovered: Recovered,
        sweep: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        """`sweep`: run after each recovery pass (the engine's parents left waiting on children)."""
        self.runs = runs
        self.leases = leases
        self.owner = owner
        self.replica_id = replica_id
        self.lease_seconds = lease_seconds
        self._active = active
        self._lost = lost
        self._recovered = recovered
        self._sweep = sweep
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        await self.recover_dead_local()
        self._stopping.clear()
        self._tasks = [
            asyncio.create_task(self._every(self.lease_seconds / 3, self.heartbeat)),
            asyncio.create_task(self._every(self.lease_seconds / 2, self._recovery_pass, self._wake)),
        ]

    async def _recovery_pass(self) -> None:
        await self.recover_lapsed()
        if self._sweep is not None:
            await self._sweep()

    def kick(self) -> None:
        """Run the recovery pass now (runs admitted from a queue wait for it), if started."""
        if self._tasks:
            self._wake.set()

    async def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _every(
        self, seconds: float, action: Callable[[], Awaitable[object]], wake: asyncio.Event | None = None
    ) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for((wake or self._stopping).wait(), seconds)
            if wake is not None:
                wake.clear()
            if self._stopping.is_set():
                return
            try:
                await action()
            except Exception:  # the database blinked: try again next tick
                log.exception("lease loop failed", extra={"action": "lease"})

    async def heartbeat(self) -> list[str]:
        """Renew our leases; stop (and return) runs that are no longer ours and running."""
        active = self._active()
        renewed = self.leases.renew_leases(self.owner, self.lease_seconds)
        if renewed == len(active):
            return []
        mine = {run.id for run in self.leases.runs_leased_by(self.owner)}
        gone = sorted((active & self._active()) - mine)
        for run_id in gone:
            run = self.runs.get_run(run_id)
            log.info("run is no longer ours", extra={"action": "lease_lost", "run_id": run_id})
            await self._lost(run)
        return gone

    async def _take(self, runs: list[Run]) -> list[str]:
        taken: list[str] = []
        active = self._active()
        for run in runs:
            if run.id in active:
                continue
            try:
                won = self.leases.take_over(run, self.owner, self.lease_seconds)
            except RunStateError:
                continue  # another process won the recovery
            admitted = run.lease_owner == ADMITTED_OWNER
            log.info("admitted run" if admitted else "recovering run",
                     extra={"action": "admit" if admitted else "recover", "run_id": run.id})  # fmt: skip
            taken.append(won.id)
            await self._recovered(won, admitted)
        return taken

    async def recover_lapsed(self) -> list[str]:
        return await self._take(self.leases.lapsed_runs())

    async def take_admitted(self) -> list[str]:
        """Runs admitted from a concurrency queue for whoever takes them (`ADMITTED_OWNER`)."""
        return await self._take([r for r in self.leases.lapsed_runs() if r.lease_owner == ADMITTED_OWNER])

    async def recover_dead_local(self) -> list[str]:
        """Runs leased by a process of this replica that is no longer alive."""
        runs = self.leases.runs_leased_by(f"{self.replica_id}:")
        dead = []
        for run in runs:
            owner = run.lease_owner
            if owner is None or owner == self.owner or owner.rsplit(":", 2)[0] != self.replica_id:
                continue  # ours, or a replica whose id merely starts with ours
            if owner_dead(owner):
                dead.append(run)
        return await self._take(dead)
