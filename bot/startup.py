"""The cyclic garbage collector around a process's start, and the `baton` executable.

A Baton process imports a few hundred modules and builds its runtime before it does any
work: hundreds of thousands of objects that live as long as the process, and almost no
cyclic garbage. On its default thresholds the collector scans them again and again while
they are created (about a tenth of a cold `baton say`), and every later full collection
scans them all once more (tens of milliseconds landing inside whatever the process is doing
then, e.g. a resume).

- `main()` (the `baton` executable) pauses automatic collection before anything is imported
  (`prepare`), and has the code Python generates while modules load (dataclass methods,
  annotations, regular expressions) compiled through a cache (`bot/compile_cache.py`).
  It also tells pydantic that Baton uses none of its plugins (`PYDANTIC_DISABLE_PLUGINS`,
  unless the operator set it: `PYDANTIC_DISABLE_PLUGINS=` empty keeps an installed plugin):
  otherwise the first model built scans every installed package's entry points for one, a
  few milliseconds of every start. Steps never inherit Baton's environment
  (`core/engine/step_env.py`), so a step's own pydantic is unaffected.
- `started()` marks the end of the start: every object allocated so far is moved to the
  permanent generation (`gc.freeze`), which collections never scan, and a pause ends.
  Long-running processes (`baton run`, `baton console`, `baton worker`, and a supervisor
  before it forks its children) call it with `collect=True` once they are running: without
  a pause (a program embedding Baton, a test, a benchmark rig) a full collection comes
  first, so that only live objects are frozen. `baton say` calls it without `collect`: in a
  test process that changes nothing. Reference counting frees acyclic objects all along.
  It also saves the generated code compiled on the way, if any was new.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from typing import NoReturn

from core.exiting import leave

__all__ = ["main", "pause_collection", "prepare", "run_cli", "started"]

_paused = False


def pause_collection() -> None:
    """Stop automatic collection until `started()`."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def prepare() -> None:
    """What the `baton` executable does before it imports anything: collection paused, the
    code that Python generates while modules load read from its cache, pydantic's plugin
    scan skipped."""
    pause_collection()
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")  # read when the first model is built
    from bot import compile_cache

    compile_cache.install()


def started(*, collect: bool = False) -> None:
    """The process has started: freeze what it allocated so far. After `pause_collection()`
    nothing was collected yet and the start's cyclic garbage is a few hundred objects (of
    about 100,000), so it is frozen as it is: a full collection would scan every object to
    find them, tens of milliseconds on a restart's way to work. Otherwise `collect` (the
    long-running processes) collects fully first, and a one-shot process does nothing."""
    global _paused
    from bot import compile_cache

    compile_cache.save()
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
    elif collect:
        gc.collect()
        gc.freeze()


def main() -> None:
    """The `baton` executable: the CLI (bot/main.py), prepared (`prepare`) while it starts,
    and left without tearing the interpreter down (`leave`)."""
    prepare()
    from bot.main import app

    run_cli(app)


def run_cli(app: Callable[[], object]) -> NoReturn:
    """Run the CLI `app`, then `leave` with its status (`python -m bot.main` does the same)."""
    try:
        app()  # click's standalone mode ends every command with SystemExit
    except SystemExit as exc:
        leave(exc.code)
    leave(0)
