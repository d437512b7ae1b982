"""Approval policies through the real `baton` command (the app as `baton run` assembles it): a
two-approver gate with a form (numbered prompts in `baton console`, `approve <run> name=value`
with `baton say`), a quorum that approves one thing (the first vote's values; other values
told and not counted), the branch taken on `hotfix`, `who approved` one vote per line, and a
timeout fired by the console's own deadline loop while it waits for input."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator

import pytest

from tests.e2e.console.cli import BatonCli, run_ids
from tests.e2e.console.terminal import Terminal

RELEASE = """
name: release
nodes:
  - id: review
    approval:
      question: "Ship it?"
      approvers: [group:sre]
      required: 2
      requester_may_approve: false
      timeout: 4h
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
TIMED = """
name: timed
nodes:
  - id: review
    approval: {question: "Quick?", approvers: [group:sre], timeout: 1s}
  - id: after
    depends_on: [review]
    bash: printf never
    replay: pure
"""
ACCESS = (
    '{"groups": {"sre": ["console:sam", "console:sue"]}, '
    '"run": {"*": ["console:rita", "console:sam"]}}'
)


@pytest.fixture
def cli(baton: BatonCli) -> BatonCli:
    (baton.workflows / "release.yaml").write_text(textwrap.dedent(RELEASE))
    (baton.workflows / "timed.yaml").write_text(textwrap.dedent(TIMED))
    baton.env_extra.update(BATON_ACCESS=ACCESS, BATON_DEADLINE_POLL_SECONDS="0.2")
    return baton


@pytest.fixture
def terminal(cli: BatonCli) -> Iterator[Terminal]:
    env = cli.env() | {"TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1", "COLUMNS": "120"}
    argv = [sys.executable, "-m", "bot.main", "console", "--user", "sam", "--conversation", "ops"]
    session = Terminal(argv, cwd=cli.home, env=env)
    yield session
    session.close()


def test_a_two_approver_gate_with_a_form_by_text_takes_the_hotfix_branch(cli: BatonCli) -> None:
    started = cli.say("run release", user="rita")
    (run_id,) = run_ids(started)
    assert "0/2 · needs @sre · requester excluded · expires in 4h" in started[-1]["text"]

    (refused,) = cli.say(f"approve {run_id} hotfix window=now", user="rita")
    assert refused["kind"] == "error" and "requested run" in refused["text"]
    (asked,) = cli.say("lgtm", user="sam")  # a plain reply: the values are asked, defaults shown
    assert asked["kind"] == "approval_values" and "default 3" in asked["text"]
    assert "Approve…" not in asked["text"] and asked["buttons"] == []  # the console has no form button
    (counted,) = cli.say(f"approve {run_id} hotfix window=now", user="sam")
    assert counted["kind"] == "vote_counted" and "1/2 · needs @sre" in counted["text"]
    assert "proposed by sam: hotfix replicas=3 window=now" in counted["text"]
    (again,) = cli.say("lgtm", user="sam")  # their vote is in: not asked for values again
    assert again["kind"] == "vote_counted" and "is in already" in again["text"]
    assert cli.run_record(run_id).status == "paused"

    # a quorum approves one thing: other values are not counted, and the voter is told how
    (differs,) = cli.say(f"approve {run_id} hotfix replicas=5 window=tonight", user="sue")
    assert differs["kind"] == "vote_differs"
    assert "proposal by sam: hotfix replicas=3 window=now" in differs["text"]
    assert "replicas: proposed 3, yours 5" in differs["text"]
    assert "window: proposed now, yours tonight" in differs["text"]
    assert cli.run_record(run_id).status == "paused"
    decided = cli.say(f"approve {run_id} agreed", user="sue")  # no values: the proposal
    assert decided[0]["kind"] == "gate_decided" and "hotfix" in decided[0]["text"]
    assert decided[-1]["run_status"] == "completed"
    assert cli.run_record(run_id).status == "completed"
    (status,) = cli.say(f"status {run_id}", user="sam")
    assert "deploy skipped" in status["text"] and "hotfix done" in status["text"]
    (who,) = cli.say(f"who approved {run_id}", user="sam")  # every vote, one per line, with its values
    lines = [line.strip() for line in who["text"].splitlines()]
    assert [line.split(" at ")[0] for line in lines if line.startswith(("sam:", "sue:"))] == [
        "sam: hotfix replicas=3 window=now", "sue: hotfix replicas=3 window=now"]
    assert any(line.startswith("sue:") and line.endswith("“agreed”") for line in lines)


def test_the_console_asks_a_forms_values_as_numbered_prompts_and_fires_a_timeout(
    cli: BatonCli, terminal: Terminal
) -> None:
    (run_id,) = run_ids(cli.say("run release", user="rita"))
    terminal.expect(r"sam>")

    start = terminal.mark()
    terminal.type(f"approve {run_id}\r")  # the first vote: its values are asked, one by one
    terminal.expect(r"1/2 replicas \(integer\) \[3\]:[\s\S]*sam>", after=start, timeout=60)
    terminal.type("7\r")
    terminal.expect(r"2/2 window \(one of: now, tonight\):[\s\S]*sam>", after=start, timeout=60)
    terminal.type("now\r")
    terminal.expect(r"Vote counted on review[\s\S]*proposed by sam: replicas=7 window=now", after=start,
                    timeout=60)
    decided = cli.say(f"approve {run_id}", user="sue")  # approves the proposal: 7 replicas, now
    assert decided[0]["kind"] == "gate_decided" and "(by sam and sue, 2/2)" in decided[0]["text"]
    assert cli.run_record(run_id).status == "completed"

    start = terminal.mark()
    terminal.type("run timed\r")  # nobody answers: the deadline loop of this process fires it
    terminal.expect(r"had no decision within 1s: rejected; the run ends here", after=start, timeout=60)
    terminal.expect(r"is cancelled \(by baton\)[\s\S]*starts fresh[\s\S]*sam>", after=start, timeout=60)
    terminal.type("\x04")  # at the prompt, once the run's last message is out
    assert terminal.wait() == 0
    timed = [r for r in cli.runs() if r.workflow == "timed"]
    assert [r.status for r in timed] == ["cancelled"] and timed[0].status_by == "baton"
    assert cli.run_record(run_id).status == "completed"


QUORUM = """
name: quorum
nodes:
  - id: review
    approval: {question: "Ship it?", approvers: [group:sre], required: 2, requester_may_approve: false}
  - id: after
    depends_on: [review]
    bash: printf shipped
    replay: pure
"""
#: sam has two accounts (the console names stand for a Slack and a Discord id alike)
PEOPLE = (
    '{"groups": {"sre": ["console:sam", "console:sam-phone", "console:sue"]}, '
    '"people": {"sam": ["console:sam", "console:sam-phone"]}, "run": {"*": ["console:rita", "console:sam"]}}'
)


def test_one_person_with_two_accounts_is_one_vote_and_one_requester(baton: BatonCli) -> None:
    """A quorum of 2 is not met by one person voting from both of their accounts, and the
    requester excluded from their gate is excluded on their other account too."""
    (baton.workflows / "quorum.yaml").write_text(textwrap.dedent(QUORUM))
    baton.env_extra["BATON_ACCESS"] = PEOPLE

    (run_id,) = run_ids(baton.say("run quorum", user="rita"))
    baton.say(f"approve {run_id}", user="sam")
    (again,) = baton.say(f"approve {run_id}", user="sam-phone")  # the same person, another account
    assert "1/2" in again["text"], again
    assert baton.run_record(run_id).status == "paused"
    baton.say(f"approve {run_id}", user="sue")
    assert baton.run_record(run_id).status == "completed"

    (mine,) = run_ids(baton.say("run quorum", user="sam"))
    (refused,) = baton.say(f"approve {mine}", user="sam-phone")  # sam requested it
    assert "requested" in refused["text"] and baton.run_record(mine).status == "paused", refused
    assert "sam-phone" not in [v for v in baton.say(f"who approved {mine}")[0]["text"].split()]
    baton.say(f"abandon {mine}", user="sam-phone")  # his own run, from his other account
    assert baton.run_record(mine).status == "cancelled"


def test_an_account_in_two_people_stops_baton_at_start(baton: BatonCli) -> None:
    baton.env_extra["BATON_ACCESS"] = '{"people": {"a": ["console:x"], "b": ["console:x"]}}'
    done = baton.run("say", "--", "runs")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "'console:x' is in people.a and people.b" in done.stderr
