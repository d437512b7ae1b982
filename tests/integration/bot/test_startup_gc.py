"""The objects of a process's start are frozen out of later garbage collections (bot/startup.py).

Through the real entry points: `serve_all` (what `baton run` runs; here the console, which
ends at the end of its input) freezes once running; `say_once` freezes only after the
executable paused collection, and then collection is resumed; a test process that was not
paused is left as it was.
"""

from __future__ import annotations

import gc
import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot import startup
from bot.serve import say_once, serve_all
from core.config import Settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "one.yaml").write_text("name: one\nnodes:\n  - id: a\n    bash: echo a\n    replay: pure\n")
    return Settings(
        database_url=f"sqlite:///{tmp_path / 'baton.db'}",
        workflow_dirs=[workflows],
        data_dir=tmp_path / "data",
        tool_modules=[],
        web_port=0,
    )


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """Start with nothing frozen and collection on; leave the test process that way."""
    gc.unfreeze()
    assert gc.isenabled()
    try:
        yield
    finally:
        startup._paused = False
        gc.enable()
        gc.unfreeze()


async def test_serve_freezes_what_the_start_allocated_once_running(
    settings: Settings, unfrozen: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("run one\n"))  # the console: one command, then EOF
    await serve_all(settings, console=True, conversation="c", user="ana")
    assert gc.get_freeze_count() > 10_000  # the modules, the store, the engine, the catalog...
    assert gc.isenabled()


async def test_say_freezes_and_resumes_collection_after_the_executable_paused_it(
    settings: Settings, unfrozen: None
) -> None:
    startup.pause_collection()  # what `baton` (bot.startup.main) does first
    assert not gc.isenabled()
    said = await say_once(settings, "run one", conversation="c", user="console:ana", thread=None,
                          event_id=None, wait=True)  # fmt: skip
    assert "completed" in {r.run_status for r in said.replies}  # it ran
    assert gc.isenabled() and gc.get_freeze_count() > 10_000


async def test_say_in_a_process_that_never_paused_collection_freezes_nothing(
    settings: Settings, unfrozen: None
) -> None:
    await say_once(settings, "run one", conversation="c", user="console:ana", thread=None, event_id=None,
                   wait=True)  # fmt: skip
    assert gc.get_freeze_count() == 0 and gc.isenabled()
