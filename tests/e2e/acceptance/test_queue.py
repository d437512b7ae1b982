"""Concurrency limits with a visible queue, on every platform (console, Slack, Discord) and both
databases: runs of a `limit: 1` key run one at a time in arrival order, the others shown
queued with their position and what they wait behind; a paused run holds its slot; `queue`
lists the key; `cancel` takes a run out of the queue; a key shared by two workflows."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.store.records import Run
from tests.e2e.acceptance.drivers import Chat, discord_chat, slack_chat

SERIAL = """\
name: serial
concurrency:
  limit: 1
nodes:
  - id: work
    bash: sleep 1; echo worked {{ inputs.message }}
    replay: pure
"""

SHIP = """\
name: {name}
concurrency:
  key: "deploy-{{{{ inputs.env }}}}"
  limit: 1
inputs:
  env: {{type: string, default: prod}}
nodes:
  - id: prepare
    bash: echo prepared
    replay: pure
  - id: review
    depends_on: [prepare]
    approval: "Ship {{{{ inputs.message }}}}?"
  - id: ship
    depends_on: [review]
    bash: echo shipped
    replay: pure
"""


@pytest.fixture(params=["slack", "discord"])
async def live_chat(
    request: pytest.FixtureRequest, tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Chat]:
    """Slack or Discord: one long-lived Baton that takes commands while runs execute (the
    console's `baton say` processes started at once: tests/e2e/console/test_queue.py)."""
    if request.param == "slack":
        async with slack_chat(tmp_path, database_url) as slack:
            yield slack
    else:
        async with discord_chat(tmp_path, database_url, monkeypatch) as discord:
            yield discord


def plain(text: str) -> str:
    """An answer without the platform's markup (`code`, *bold*, **bold**)."""
    return text.replace("`", "").replace("*", "")


def newest(chat: Chat, count: int) -> list[Run]:
    """The `count` newest runs, oldest first."""
    return sorted(chat.runs(), key=lambda r: r.created_at)[-count:]


async def test_three_runs_of_a_limit_1_workflow_run_one_at_a_time_in_order(live_chat: Chat) -> None:
    chat = live_chat
    (chat.workflows / "serial.yaml").write_text(SERIAL)
    told = [plain(await chat.submit(f'run serial "{m}" --force')) for m in "abc"]
    runs = newest(chat, 3)
    done = [await chat.status(r.id, "completed") for r in runs]

    assert "queued #" not in told[0]  # the first one starts at once
    assert "queued #1 for" in told[1] and "serial" in told[1] and runs[0].id[:6] in told[1]
    assert "queued #2 for" in told[2]
    spans = [chat.windows(r.id) for r in done]
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, f"two runs of a limit 1 key at once: {spans}"


async def test_paused_run_holds_its_slot_shared_key_queue_and_cancel(chat: Chat) -> None:
    (chat.workflows / "ship.yaml").write_text(SHIP.format(name="ship"))
    (chat.workflows / "ship-hotfix.yaml").write_text(SHIP.format(name="ship-hotfix"))
    held = await chat.start('run ship "v1"')
    assert held.status == "paused"

    second = plain(await chat.submit('run ship "v2" --force'))
    third = plain(await chat.submit('run ship-hotfix "v3"'))  # another workflow, the same key
    _, v2, v3 = newest(chat, 3)
    assert (v2.status, v3.status) == ("queued", "queued")
    assert "queued #1 for deploy-prod" in second
    assert f"behind {held.id[:6]} (paused at review for" in second
    assert "queued #2 for" in third

    listing = plain(await chat.submit("queue deploy-prod"))
    assert held.id in listing and v2.id in listing and v3.id in listing
    assert listing.index(v2.id) < listing.index(v3.id)

    cancelled = await chat.submit(f"cancel {v3.id}")
    assert v3.id in cancelled
    await chat.status(v3.id, "cancelled")

    await chat.command(f"approve {held.id}")
    await chat.status(held.id, "completed")
    started = await chat.status(v2.id, "paused")  # admitted when the holder rested: ran to its gate
    assert started.id == v2.id
    await chat.shown(v2.id, "review")  # its progress message was edited when it started
