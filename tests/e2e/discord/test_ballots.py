"""A gate's button and the form it opens decide with a ballot (#27), through Discord: the
values typed in the modal read like a command deciding another run's gate (`approve <other>
--`, quotes, backticks); only the clicked gate is decided, with the values exactly as typed,
and a click on the other run's Reject decides that gate only. Gateway payloads into the real
discord.py client; what Discord received, from the fake."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from core.config import Access, Settings
from core.delivery.button_refs import command_of, parse
from core.store.records import GateStatus, RunStatus
from tests.e2e.discord.fake_discord import GUILD_ID
from tests.e2e.discord.gateway import ANA, BOB
from tests.e2e.discord.harness import DiscordBot, custom_ids

NOTES = """
name: notes
nodes:
  - id: review
    approval:
      question: "Publish?"
      form:
        note: {type: string}
  - id: publish
    depends_on: [review]
    bash: printf '%s' {{ nodes.review.values.note }}
    replay: pure
"""
OTHER = """
name: other
nodes:
  - id: gate
    approval: "Go?"
"""


def _person(who: dict[str, Any]) -> str:
    return f"discord:{who['id']}"


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "notes.yaml").write_text(textwrap.dedent(NOTES))
    (workflows / "other.yaml").write_text(textwrap.dedent(OTHER))
    return Settings(
        database_url=sqlite_url, workflow_dirs=[workflows], data_dir=tmp_path / "data", tool_modules=[],
        prompt_provider="fake", discord_guild_id=int(GUILD_ID),
        access=Access.model_validate({"run": {"*": [_person(ANA)]}, "approve": {"*": [_person(BOB)]}}),
        _env_file=None,  # type: ignore[call-arg]
    )  # fmt: skip


def _button(bot: DiscordBot, thread: str, command: str) -> str:
    """The custom_id of the gate message's button that runs `command`."""
    gate = bot.message_with(thread, "waits for approval")
    for cid in custom_ids(gate["components"], enabled=True):
        ref = parse(cid)
        if ref is not None and command_of(ref, bot.baton.store.blobs.get_blob) == command:
            return cid
    raise AssertionError(f"no button runs {command!r}")


async def test_a_forms_values_that_read_like_a_command_decide_only_its_own_gate(bot: DiscordBot) -> None:
    other_id, other_thread, other = await bot.start("run other", who=ANA)
    notes_id, notes_thread, notes = await bot.start("run notes", who=ANA)
    assert other.status == "paused" and notes.status == "paused"
    await bot.posted_in(other_thread, "waits for approval")
    await bot.posted_in(notes_thread, "waits for approval")
    typed = f"approve {other_id} -- x \"quoted\" `rm -rf /` 'single' reject {other_id}"

    click = bot.click(_button(bot, notes_thread, f"approve {notes_id}"), who=BOB)
    assert (await bot.acknowledged(click)).json["type"] == 9  # the gate's form, as a modal
    await bot.acknowledged(bot.submit({"note": typed}, who=BOB))
    await bot.posted_in(notes_thread, " completed in ")
    assert (await bot.rested(notes_id)).status == "completed"

    store = bot.baton.store
    gate = store.gates.get_gate(notes_id, "review")
    assert gate.status is GateStatus.APPROVED and gate.decided_by == _person(BOB)
    assert gate.outcome["values"] == {"note": typed}  # the value exactly as typed
    [publish] = [e for e in store.steps.journal([notes_id]) if e.node_id == "publish"]
    assert publish.output_digest and store.blobs.get_blob(publish.output_digest) == typed.encode()
    # the other run, named in the text, is untouched
    assert store.runs.get_run(other_id).status is RunStatus.PAUSED
    waiting = store.gates.get_gate(other_id, "gate")
    assert waiting.status is GateStatus.WAITING
    assert store.ballots.gate_votes(other_id, "gate", waiting.created_at) == []

    click = bot.click(_button(bot, other_thread, f"reject {other_id}"), who=BOB)
    await bot.acknowledged(click)
    [told] = await bot.answers(click)
    assert "Rejected the gate" in told.content
    assert (await bot.rested(other_id)).status == "cancelled"
    assert store.gates.get_gate(other_id, "gate").status is GateStatus.REJECTED
    assert store.gates.get_gate(notes_id, "review").status is GateStatus.APPROVED  # as it was
