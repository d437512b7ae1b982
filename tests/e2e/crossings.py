"""Calls between the core and one adapter, recorded by a profile hook on the event loop's thread:
how many times a reply changes direction on its way out (#27). A coroutine resumed after an
await is the same call, counted once; records' constructors are data, not calls of a layer."""

from __future__ import annotations

import dis
import functools
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from types import CodeType, FrameType

#: what an adapter may use of the core while it posts: rendering, the redactor, button refs
RENDERING = ("core.render", "core.redaction", "core.splitting", "core.delivery.buttons", "core.errors")
#: what the delivery service decides: an adapter calling any of it is a hop back
DECISIONS = ("core.delivery.edits.Edits", "core.delivery.fallbacks",
             "core.commands.handler.Handler.attach_thread", "core.delivery.service.DeliveryService._",
             "core.delivery.service.DeliveryService.send", "core.commands.progress")


@functools.cache
def _start(code: CodeType) -> int:
    """Where a call of `code` starts (its first RESUME); a coroutine resumed is elsewhere."""
    return next(i.offset for i in dis.get_instructions(code) if i.opname == "RESUME")


class Crossings:
    """(caller layer "A" or "C", callee `module.function`) -> calls, for `adapter` (a package)."""

    def __init__(self, adapter: str) -> None:
        self.adapter = adapter
        self.calls: Counter[tuple[str, str]] = Counter()

    def _layer(self, module: str) -> str | None:
        if module.startswith(self.adapter):
            return "A"
        return "C" if module.startswith("core.") else None

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if event != "call" or frame.f_back is None or "__create_fn__" in frame.f_code.co_qualname:
            return
        callee = self._layer(frame.f_globals.get("__name__", ""))
        caller = self._layer(frame.f_back.f_globals.get("__name__", ""))
        if callee is None or caller is None or callee == caller:
            return
        if frame.f_lasti != _start(frame.f_code):  # a coroutine resumed after an await
            return
        self.calls[(caller, f"{frame.f_globals['__name__']}.{frame.f_code.co_qualname}")] += 1

    def callbacks(self) -> dict[str, int]:
        """The adapter's calls into the core, rendering aside."""
        return {callee: n for (caller, callee), n in self.calls.items()
                if caller == "A" and not callee.startswith(RENDERING)}

    def decisions(self) -> dict[str, int]:
        """The adapter's calls into what the delivery service decides: none, by design."""
        return {callee: n for callee, n in self.callbacks().items() if callee.startswith(DECISIONS)}

    def to_adapter(self, cls: str) -> dict[str, int]:
        """The core's calls of `cls`'s methods (the transport)."""
        return {callee.rsplit(".", 1)[1]: n for (caller, callee), n in self.calls.items()
                if caller == "C" and callee.startswith(f"{cls}.")}


@contextmanager
def recorded(adapter: str) -> Iterator[Crossings]:
    crossings = Crossings(adapter)
    sys.setprofile(crossings)
    try:
        yield crossings
    finally:
        sys.setprofile(None)
