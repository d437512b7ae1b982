"""`--args @handle` belongs to its run: through the application as `baton say` assembles it
(`build_baton(settings)`), a handle resolves only among the args of runs the user may view.
The handle of a run they may not view, a step output's digest and a prefix nothing has are
answered byte for byte alike, so nobody learns which prefixes exist."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.console.messages import to_chat_message
from bot.app import Baton, build_baton
from core.commands.messages import Reply
from core.config import Access, Settings
from core.render import render

ANA, MALLORY = "ana", "mallory"


@pytest.fixture
async def baton(tmp_path: Path, database_url: str) -> AsyncIterator[Baton]:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    for name in ("private", "hello"):
        (workflows / f"{name}.yaml").write_text(textwrap.dedent(f"""\
            name: {name}
            inputs:
              token: {{type: string, default: none}}
            nodes:
              - id: say
                bash: echo {name} output
                replay: pure
            """))
    access = Access(  # mallory may run hello; only ana may run (and so view) private
        run={"private": [f"console:{ANA}"], "hello": [f"console:{ANA}", f"console:{MALLORY}"]},
        approve={},
    )
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=database_url,
        workflow_dirs=[workflows],
        data_dir=tmp_path / "data",
        tool_modules=[],
        access=access,
    )
    baton = build_baton(settings)
    try:
        async with baton.running(handle_signals=False, grace=2.0):
            yield baton
    finally:
        baton.close()


async def say(baton: Baton, user: str, text: str) -> list[Reply]:
    replies = await baton.handler.handle(to_chat_message(text, "ops", user))
    for reply in replies:
        if reply.run_id and not reply.is_error:
            await baton.engine.wait(reply.run_id, timeout=30)
    await baton.handler.drain()
    return replies


def shown(baton: Baton, replies: list[Reply]) -> list[str]:
    platforms = ("console", "slack", "discord")
    return ["\n".join(render(r, platform, baton.redactor)) for r in replies for platform in platforms]


async def test_a_handle_of_a_run_the_user_may_not_view_is_answered_like_an_unknown_one(baton: Baton) -> None:
    await say(baton, ANA, "run private --set token=hunter2-private")
    (private,) = [r for r in baton.store.runs.recent_runs() if r.workflow == "private"]
    await say(baton, MALLORY, "run hello")
    (hello,) = [r for r in baton.store.runs.recent_runs() if r.workflow == "hello"]
    output = baton.store.steps.journal([hello.id])[0].output_digest
    assert output is not None
    taken = {r.args_digest for r in baton.store.runs.recent_runs()} | {output}
    unknown = next(f"{n:08x}" for n in range(1 << 16) if not any(d.startswith(f"{n:08x}") for d in taken))

    forbidden = shown(baton, await say(baton, MALLORY, f"run hello --args @{private.args_digest[:8]}"))
    step_output = shown(baton, await say(baton, MALLORY, f"run hello --args @args:{output[:8]}"))
    nothing = shown(baton, await say(baton, MALLORY, f"run hello --args @{unknown}"))

    assert forbidden == step_output == nothing
    assert "No args of a run you may view match that handle." in nothing[0]
    assert [r.workflow for r in baton.store.runs.recent_runs()].count("hello") == 1  # nothing started
    short = shown(baton, await say(baton, MALLORY, f"run hello --args @{private.args_digest[:4]}"))
    if not any(d.startswith(private.args_digest[:4]) for d in taken - {private.args_digest}):
        assert short == nothing  # a 4-character prefix tells no more than 8 do


async def test_a_handle_resolves_for_whoever_may_view_the_run(baton: Baton) -> None:
    await say(baton, ANA, "run private --set token=hunter2-private")
    (private,) = baton.store.runs.recent_runs()

    (started,) = await say(baton, ANA, f"run private --force --args @args:{private.args_digest[:8]}")
    assert not started.is_error
    again = baton.store.runs.get_run(started.run_id or "")
    assert again.args_digest == private.args_digest  # her own args, by handle
    (mine,) = await say(baton, MALLORY, "run hello --set token=mine")
    hello = baton.store.runs.get_run(mine.run_id or "")
    (reused,) = await say(baton, MALLORY, f"run hello --force --args @{hello.args_digest[:6]}")
    assert not reused.is_error
    assert baton.store.runs.get_run(reused.run_id or "").args_digest == hello.args_digest
