"""The one shutdown path of a serving process (`baton run`, `say`, `console`, `worker`).

    shutdown = Shutdown(grace=settings.shutdown_grace, what="input", on_first=worker.stop)
    with shutdown.signals():          # SIGTERM / SIGINT handled while inside
        ...                           # serve until `shutdown.stopping` is set

The first SIGTERM/SIGINT sets `stopping` (and calls `on_first`): the process takes no new
input, and what is in flight gets `grace` seconds. A second signal cancels the task that
entered `signals()`, for a fast exit; `forced` tells the caller to give no grace.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger("baton.shutdown")

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Shutdown:
    def __init__(self, *, grace: float, what: str, on_first: Callable[[], None] | None = None) -> None:
        self.grace = grace
        self.what = what  # "input" or "steps": what the process stops taking
        self.stopping = asyncio.Event()
        self.count = 0
        self._on_first = on_first
        self._main: asyncio.Task[object] | None = None

    @property
    def forced(self) -> bool:
        """A second signal came: stop now, without grace."""
        return self.count > 1

    def request(self) -> None:
        """Stop taking input (as the first signal does)."""
        if not self.stopping.is_set():
            self.stopping.set()
            if self._on_first is not None:
                self._on_first()

    def _received(self, signum: int) -> None:
        self.count += 1
        name = signal.Signals(signum).name
        if self.count == 1:
            log.info(
                "stopping: no new %s; in-flight steps get %.0fs",
                self.what,
                self.grace,
                extra={"action": "shutdown", "signal": name},
            )
            self.request()
        elif self._main is not None:
            log.warning("second %s: stopping now", name, extra={"action": "shutdown_forced"})
            self._main.cancel()

    @contextmanager
    def signals(self, enabled: bool = True) -> Iterator[Shutdown]:
        """Handle SIGTERM/SIGINT on the running loop while inside (where the platform and the
        thread allow; `enabled=False` for embedding, e.g. tests)."""
        loop = asyncio.get_running_loop()
        self._main = asyncio.current_task()
        installed: list[signal.Signals] = []
        if enabled:
            for sig in SIGNALS:
                try:
                    loop.add_signal_handler(sig, self._received, sig)
                except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
                    continue
                installed.append(sig)
        try:
            yield self
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
