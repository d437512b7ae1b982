"""A two-approver gate with a form, through Discord: Approve opens a modal as the click's first
answer (interaction callback type 9), its submission (a modal-submit interaction) is checked by
the core and counts as one vote, whose choice and values become the gate's proposal; other
values typed by the second approver are not counted (told privately how they differ), their
click on the choice approves the proposal and opens the gate, the branch on `hotfix` is taken,
and the gate message's headline becomes the outcome naming both voters. Gateway payloads into
the real discord.py client; what Discord received, from the fake."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from core.config import Access, Settings
from core.delivery.button_refs import command_of, parse
from tests.e2e.discord.fake_discord import GUILD_ID
from tests.e2e.discord.gateway import ANA, BOB, MALLORY
from tests.e2e.discord.harness import DiscordBot, custom_ids

RELEASE = """
name: release
nodes:
  - id: review
    approval:
      question: "Ship it?"
      approvers: [group:sre]
      required: 2
      requester_may_approve: false
      form:
        replicas: {type: integer, default: 3}
        window: {type: string, enum: [now, tonight]}
      choices: [approve, hotfix, reject]
  - id: deploy
    depends_on: [review]
    when: "{{ nodes.review.decision == 'approve' }}"
    bash: printf 'deploy x%s' {{ nodes.review.values.replicas }}
    replay: pure
  - id: hotfix
    depends_on: [review]
    when: "{{ nodes.review.decision == 'hotfix' }}"
    bash: printf 'hotfix x%s %s' {{ nodes.review.values.replicas }} {{ nodes.review.values.window }}
    replay: pure
"""

DEPLOY = """
name: deploy
inputs:
  service: {type: string, required: true}
nodes:
  - id: ship
    bash: printf 'deploying %s' {{ inputs.service }}
    replay: pure
"""


def _person(who: dict[str, Any]) -> str:
    return f"discord:{who['id']}"


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "release.yaml").write_text(textwrap.dedent(RELEASE))
    (workflows / "deploy.yaml").write_text(textwrap.dedent(DEPLOY))
    return Settings(
        database_url=sqlite_url, workflow_dirs=[workflows], data_dir=tmp_path / "data", tool_modules=[],
        prompt_provider="fake", discord_guild_id=int(GUILD_ID),
        access=Access.model_validate({"groups": {"sre": [_person(BOB), _person(MALLORY)]},
                                      "run": {"*": [_person(ANA)]}}),
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


async def _vote_in_modal(bot: DiscordBot, thread: str, command: str, who: dict[str, Any],
                         values: dict[str, str]) -> None:
    click = bot.click(_button(bot, thread, command), who=who)
    modal = (await bot.acknowledged(click)).json
    assert modal["type"] == 9 and modal["data"]["title"] == "Approve review"  # the click's first answer
    fields = {c["custom_id"]: c for row in modal["data"]["components"] for c in row["components"]}
    assert fields["field:replicas"]["value"] == "3"  # the default, shown
    await bot.acknowledged(bot.submit(values, who=who))


async def test_a_two_approver_gate_with_a_form_takes_the_hotfix_branch(bot: DiscordBot) -> None:
    run_id, thread, run = await bot.start("run release", who=ANA)
    assert run.status == "paused"
    await bot.posted_in(thread, "0/2 · needs **@sre** · requester excluded")
    hotfix = f"approve {run_id} hotfix"
    _button(bot, thread, hotfix)  # a button per choice

    await _vote_in_modal(bot, thread, hotfix, BOB, {"replicas": "2", "window": "tonight"})
    await bot.posted_in(thread, "1/2 · needs **@sre**")  # the gate message, edited
    assert bot.baton.store.runs.get_run(run_id).status == "paused"

    await bot.posted_in(thread, f"proposed by <@{BOB['id']}>: `hotfix` `replicas=2` `window=tonight`")

    # other values are not counted toward the proposal: Mallory is told how, privately
    typed = bot.command(f"approve {run_id} hotfix replicas=4 window=now", who=MALLORY)
    [told] = await bot.answers(typed)
    assert "Not counted" in told.json["content"] and (told.json.get("flags") or 0) & 64  # ephemeral
    assert "proposed `2`, yours `4`" in told.json["content"]
    assert bot.baton.store.runs.get_run(run_id).status == "paused"

    # the hotfix button, with no values, approves the proposal: no modal this time
    click = bot.click(_button(bot, thread, hotfix), who=MALLORY)
    assert (await bot.acknowledged(click)).json["type"] != 9
    done = await bot.rested(run_id)
    assert done.status == "completed"
    store = bot.baton.store
    [entry] = [e for e in store.steps.journal([run_id]) if e.node_id == "hotfix"]
    assert entry.output_digest and store.blobs.get_blob(entry.output_digest) == b"hotfix x2 tonight"
    states = {n.node_id: n.state.value for n in bot.baton.engine.summary(run_id).nodes}
    assert states == {"review": "done", "deploy": "skipped", "hotfix": "done"}
    gate = store.gates.get_gate(run_id, "review")
    assert gate.decision == "hotfix"
    assert [a["user"] for a in gate.outcome["approvers"]] == [_person(BOB), _person(MALLORY)]

    # the gate message, edited once decided: its headline is the outcome, naming both voters
    headline = f"🩹 `hotfix` chosen by <@{BOB['id']}> and <@{MALLORY['id']}> (2/2)"
    edit = await bot.posted_in(thread, headline)
    assert edit.method == "PATCH" and edit.content.startswith(headline)
    assert "waits for approval" not in edit.content and "1/2" not in edit.content

async def test_two_forms_open_at_once_each_go_to_their_own_command(bot: DiscordBot) -> None:
    """Bob's approval form and Ana's deploy form are open together: each submission is checked
    against its own form and does its own thing (discord.py keeps one modal per custom_id)."""
    run_id, thread, _ = await bot.start("run release", who=ANA)
    await bot.posted_in(thread, "0/2 · needs **@sre**")
    click = bot.click(_button(bot, thread, f"approve {run_id}"), who=BOB)
    assert (await bot.acknowledged(click)).json["type"] == 9
    asked = bot.subcommand("run", name="deploy", message="go", who=ANA)
    assert (await bot.acknowledged(asked)).json["type"] == 9
    assert bot.modal_of(BOB) != bot.modal_of(ANA)

    vote = (await bot.acknowledged(bot.submit({"replicas": "5", "window": "now"}, who=BOB))).json
    assert "required" not in str(vote)
    await bot.posted_in(thread, "1/2 · needs **@sre**")  # Bob's vote counted on the gate
    (started,) = await bot.answers(bot.submit({"service": "web"}, who=ANA))
    assert "Started" in started.content

    store = bot.baton.store
    [deploy] = [r for r in store.runs.recent_runs(platform="discord") if r.workflow == "deploy"]
    assert deploy.requester == _person(ANA)
    assert bot.baton.engine.args_of(deploy)["service"] == "web"
    assert (await bot.rested(deploy.id)).status == "completed"
    assert store.runs.get_run(run_id).status == "paused"
