"""Schedules end to end on the console: `baton console` in a real pseudo-terminal, a person
types `schedule add hello every 2s`, and runs start by themselves while the bot serves, each
announced and reported; `schedule pause` stops it, `resume` restarts it, `rm` removes it.
Two `baton console` processes on one SQLite database start exactly one run per fire."""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterator

import pytest

from tests.e2e.console import cli
from tests.e2e.console.cli import BatonCli
from tests.e2e.console.terminal import Terminal, plain

HELLO = """name: hello
nodes:
  - id: greet
    bash: echo hello from the schedule
    replay: pure
"""


def _console(baton: BatonCli, user: str) -> Terminal:
    env = baton.env() | {
        "TERM": "xterm-256color",
        "PROMPT_TOOLKIT_NO_CPR": "1",
        "COLUMNS": "160",
        "BATON_SCHEDULE_POLL_SECONDS": "0.5",
    }
    argv = [sys.executable, "-m", "bot.main", "console", "--user", user, "--conversation", "ops"]
    return Terminal(argv, cwd=baton.home, env=env, columns=160)


@pytest.fixture
def terminal(baton: BatonCli) -> Iterator[Terminal]:
    (baton.workflows / "hello.yaml").write_text(HELLO)
    session = _console(baton, "ana")
    yield session
    session.close()


def _fired(text: str) -> list[str]:
    return re.findall(r"Schedule \S+ started hello run (\w+)", text)


def test_schedule_add_fires_while_the_console_serves_then_pause_resume_rm(
    baton: BatonCli, terminal: Terminal
) -> None:
    terminal.expect(r"ana>")
    terminal.type("schedule add hello every 2s\r")
    added = terminal.expect(r"Schedule (hello-[0-9a-f]{4}) added", timeout=30)
    sid = added.group(1)
    start = terminal.mark()
    terminal.expect(
        r"started hello run \w+[\s\S]*completed in[\s\S]*started hello run \w+", after=start, timeout=30
    )
    terminal.type(f"schedule pause {sid} quiet please\r")
    paused = terminal.expect(r"paused by ana: quiet please", timeout=30)
    runs_at_pause = {r.id for r in baton.runs() if r.started_by == f"schedule:{sid}"}
    assert len(runs_at_pause) >= 2
    terminal.type(f"schedule show {sid}\r")  # each fire and what became of it
    shown = terminal.expect(r"Last fires[\s\S]*ana>", after=paused.end(), timeout=30)
    assert "started" in shown.group(0)
    terminal.type(f"schedule resume {sid}\r")
    resumed = terminal.expect(r"resumed by ana", timeout=30)
    terminal.expect(r"started hello run \w+", after=resumed.end(), timeout=30)
    terminal.type(f"schedule rm {sid}\r")
    terminal.expect(r"removed by ana", timeout=30)
    for run in baton.runs():  # every run it started came to rest and was reported
        terminal.expect(rf"hello run {run.id} completed in", timeout=30)
    terminal.type("schedule list\r")
    terminal.expect(r"No schedules yet[^\n]*\n[\s\S]*ana>", timeout=30)
    terminal.type("\x04")
    assert terminal.wait() == 0
    runs = [r for r in baton.runs() if r.started_by == f"schedule:{sid}"]
    assert len(runs) > len(runs_at_pause)
    assert all(baton.run_record(r.id).status == "completed" for r in runs)
    assert len({r.scheduled_for for r in runs}) == len(runs)  # one run per due time


def test_two_processes_on_one_sqlite_database_start_one_run_per_fire(baton: BatonCli) -> None:
    (baton.workflows / "hello.yaml").write_text(HELLO)
    one, two = _console(baton, "ana"), _console(baton, "bob")
    try:
        one.expect(r"ana>")
        two.expect(r"bob>")
        one.type("schedule add hello every 1s\r")
        sid = one.expect(r"Schedule (hello-[0-9a-f]{4}) added", timeout=30).group(1)
        # both processes fire it: wait until each has started runs of it (its own announcements)
        one.expect(r"(started hello run \w+[\s\S]*){3}", timeout=60)
        two.expect(r"(started hello run \w+[\s\S]*){2}", timeout=60)
        one.type(f"schedule pause {sid}\r")
        one.expect(r"paused by ana", timeout=30)
        for run in baton.runs():  # each run came to rest, reported by the process that started it
            (one if run.id in _fired(plain(one.output)) else two).expect(
                rf"hello run {run.id} completed in", timeout=30
            )
        for session, name in ((one, "ana"), (two, "bob")):
            session.type("help schedule\r")
            session.expect(rf"schedule pause <id> \[note\][\s\S]*{name}>", after=session.mark(), timeout=30)
            session.type("\x04")
        assert one.wait() == 0 and two.wait() == 0
    finally:
        one.close()
        two.close()
    runs = [r for r in baton.runs() if r.started_by == f"schedule:{sid}"]
    per_fire = Counter(r.scheduled_for for r in runs)
    assert len(runs) >= 5 and max(per_fire.values()) == 1
    told_one, told_two = set(_fired(plain(one.output))), set(_fired(plain(two.output)))
    assert told_one and told_two and not told_one & told_two  # each run told by the process that won it


def test_a_cron_that_never_fires_is_refused_in_chat_and_in_a_workflow_file(baton: BatonCli) -> None:
    """`0 2 30 2 *` (February 30th) is a valid cron expression that matches no date: it was
    answered "Something unexpected went wrong"; now it is one line with the fix."""
    (baton.workflows / "hello.yaml").write_text(HELLO)
    (refused,) = baton.say('schedule add hello "0 2 30 2 *"')
    assert refused["kind"] == "error" and "`0 2 30 2 *` never fires" in str(refused["text"]), refused
    assert "went wrong" not in str(refused["text"])
    assert "No schedules" in str(baton.say("schedule list")[0]["text"])

    (baton.workflows / "never.yaml").write_text(
        'name: never\nschedules:\n  - {id: nightly, cron: "0 0 31 4 *"}\nnodes:\n  - {id: a, bash: echo hi}\n'
    )
    (broken,) = baton.say("run never")
    assert "never.yaml:3" in str(broken["text"]) and "never fires" in str(broken["text"]), broken


NIGHTLY_CHECK = """name: nightly-check
schedules:
  - id: weekdays
    cron: "0 2 * * 1-5"
    args: {message: all good}
nodes:
  - id: check
    bash: echo checked
    replay: pure
"""


def _text(replies: list[dict[str, object]]) -> str:
    return "\n".join(str(r["text"]) for r in replies)


def _added(reply: dict[str, object]) -> str:
    assert reply["kind"] == "schedule_added", reply
    found = re.search(r"Schedule (\S+) added", str(reply["text"]))
    assert found, reply["text"]
    return found.group(1)


def test_schedule_run_of_a_queued_fire_returns_and_says_it_is_queued(
    baton: BatonCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Overlap `queue`: the second `schedule run` while the first fire waits at its gate
    queued its run and then waited for it forever (the reply had a run id but no status)."""
    monkeypatch.setattr(cli, "CALL_TIMEOUT", 30.0)  # a hang fails in 30 s, not 60
    (added,) = baton.say('schedule add gated "0 5 * * *" --overlap queue', wait=False)
    sid = _added(added)
    (first,) = baton.say(f"schedule run {sid}", wait=False)
    assert baton.run_record(first["run_id"]).status == "paused"  # driven to its gate, then returned
    (second,) = baton.say(f"schedule run {sid}", wait=False)
    assert second["run_status"] == "queued", second
    text = str(second["text"])
    assert f"run {second['run_id']} queued" in text and "started" not in text, text
    assert f"behind {first['run_id'][:6]}" in text and "paused at review" in text, text
    assert baton.run_record(second["run_id"]).status == "queued"


def test_schedule_usage_says_which_action_takes_what(baton: BatonCli) -> None:
    (bare,) = baton.say("schedule show")
    assert bare["kind"] == "error" and "`schedule show` needs <id>" in str(bare["text"]), bare
    usage = str(baton.say("help schedule")[0]["text"])
    assert "schedule pause <id> [note]" in usage and "rm <id> [note]" not in usage, usage
    (added,) = baton.say('schedule add notes "0 5 * * *"')
    (extra,) = baton.say(f"schedule resume {_added(added)} back")
    assert extra["kind"] == "error" and "`schedule resume` takes only <id>" in str(extra["text"]), extra
    assert "queued" in str(baton.say("help subscribe")[0]["text"])


def test_a_workflow_files_schedules_are_seen_by_a_one_shot_say_without_firing(baton: BatonCli) -> None:
    """No `baton console` or `baton run` ticked yet (only a tick synced the files' schedules
    into the store): `schedule list` and `show` see the file's schedule all the same, and
    nothing fires."""
    (baton.workflows / "nightly-check.yaml").write_text(NIGHTLY_CHECK)
    listed = _text(baton.say("schedule list"))
    assert "nightly-check.weekdays" in listed and "from its workflow's file" in listed, listed
    (shown,) = baton.say("schedule show nightly-check.weekdays")
    assert shown["kind"] == "schedule_shown" and "Next fires" in str(shown["text"]), shown
    assert "It has not fired yet." in str(shown["text"]), shown
    assert baton.runs() == []  # seen, not fired


def test_a_workflow_files_schedule_is_managed_by_admins_and_the_refusal_says_where_it_lives(
    baton: BatonCli,
) -> None:
    """BATON_ACCESS unset: no admin, so nobody may pause or fire a file's schedule in chat.
    The refusal said "Only a Baton admin (it is declared in its workflow's file) or an admin
    may …" and "Ask its owner or an admin" (it has no owner, and there is no admin)."""
    (baton.workflows / "nightly-check.yaml").write_text(NIGHTLY_CHECK)
    file = str(baton.workflows / "nightly-check.yaml")
    (removed,) = baton.say("schedule rm nightly-check.weekdays")
    text = str(removed["text"])
    assert removed["kind"] == "error" and "or an admin may" not in text, text
    assert "declared in workflow `nightly-check`'s file: it is removed there" in text and file in text, text
    for verb, says in (("pause", "pause"), ("resume", "resume"), ("run", "fire")):
        (refused,) = baton.say(f"schedule {verb} nightly-check.weekdays")
        text = str(refused["text"])
        assert refused["kind"] == "error", text
        assert f"file: only an admin may {says} it; ana is not one" in text, text
        assert "owner" not in text and "No Baton admin is configured" in text and file in text, text
    assert "/workflow run nightly-check" in text  # `run`: what ana may do instead
    assert baton.runs() == []
    baton.env_extra["BATON_ACCESS"] = '{"admins": ["console:root"], "run": {"*": ["*"]}}'
    (refused,) = baton.say("schedule pause nightly-check.weekdays")
    assert f"Ask an admin, or change or remove it in {file}." in str(refused["text"]), refused
    (paused,) = baton.say("schedule pause nightly-check.weekdays", user="root")
    assert "paused by root" in str(paused["text"]), paused


def test_a_schedules_arguments_are_shown_when_added_and_in_show(baton: BatonCli) -> None:
    """`--set` values were stored and passed to every run, but no reply showed them."""
    (added,) = baton.say('schedule add needs-version "0 5 * * *" --set version=1.10')
    sid = _added(added)
    assert 'Arguments: {"version":"1.10"}' in str(added["text"]), added["text"]
    (shown,) = baton.say(f"schedule show {sid}")
    assert 'Arguments: {"version":"1.10"}' in str(shown["text"]), shown["text"]
