from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from core.commands.model import RunCommand
from core.commands.parser import parse
from core.commands.quoting import escape_double
from core.commands.resolution import (
    Prompt,
    Start,
    decide_fresh_run,
    gates_addressed,
    next_commands,
    preview,
    prompt_options,
    run_command_text,
)
from core.store.records import RunStatus
from tests.unit.commands.samples import make_gate, make_run

FAILED = make_run(id="r-failed", status=RunStatus.FAILED)
PAUSED = make_run(id="r-paused", status=RunStatus.PAUSED)


def test_no_unfinished_run_starts() -> None:
    assert decide_fresh_run([], force=False, explicit_run=False) == Start()


def test_unfinished_run_prompts_with_the_newest() -> None:
    assert decide_fresh_run([FAILED, PAUSED], force=False, explicit_run=False) == Prompt(FAILED, others=1)


def test_force_or_explicit_run_id_never_prompts() -> None:
    assert decide_fresh_run([FAILED], force=True, explicit_run=False) == Start()
    assert decide_fresh_run([FAILED], force=False, explicit_run=True) == Start()


def test_finished_runs_do_not_prompt() -> None:
    done = make_run(status=RunStatus.COMPLETED)
    assert decide_fresh_run([done, make_run(status=RunStatus.CANCELLED)], False, False) == Start()


def test_options_resume_abandon_force_and_the_new_message_survives() -> None:
    command = parse('run release-notes "B" --set version=1.4')
    assert isinstance(command, RunCommand)
    first, second, third = prompt_options(Prompt(FAILED), command, gate_waiting=False)
    assert (first.action, first.command) == ("resume", "resume r-failed")
    assert second.action == "abandon"
    assert second.command == "run release-notes --replace r-failed --set version=1.4 B"
    assert parse(second.command) == RunCommand("release-notes", message="B", sets=command.sets,
                                               replace="r-failed")
    assert third.command == "run release-notes --force --set version=1.4 B"
    again = parse(third.command)
    assert again == RunCommand("release-notes", message="B", sets=command.sets, force=True)


def test_paused_run_with_waiting_gate_offers_approve_first() -> None:
    command = RunCommand("release-notes", message="B")
    first = prompt_options(Prompt(PAUSED), command, gate_waiting=True)[0]
    assert (first.action, first.command) == ("approve", "approve r-paused")
    assert prompt_options(Prompt(PAUSED), command, gate_waiting=False)[0].command == "resume r-paused"


def test_message_with_quotes_backslashes_and_backticks_is_escaped_and_pastes_back() -> None:
    message = 'say "hi" \\ then `rm -rf` done'
    option3 = prompt_options(Prompt(FAILED), RunCommand("X", message=message), gate_waiting=False)[2]
    assert option3.command == 'run X --force "say \\"hi\\" \\\\ then \\`rm -rf\\` done"'
    assert escape_double(message) in option3.command
    assert parse(option3.command) == RunCommand("X", message=message, force=True)


@given(st.text(min_size=1).filter(lambda t: t.strip() == t and t))
def test_any_message_survives_option_three(message: str) -> None:
    option3 = prompt_options(Prompt(FAILED), RunCommand("X", message=message), gate_waiting=False)[2]
    parsed = parse(option3.command)
    assert isinstance(parsed, RunCommand) and parsed.force
    assert parsed.message == message


def test_args_json_and_handle_are_re_emitted() -> None:
    command = parse("run X --args '{\"b\": 1, \"a\": \"x y\"}' go")
    assert isinstance(command, RunCommand)
    assert parse(run_command_text(command, force=True)) == RunCommand("X", "go", args={"a": "x y", "b": 1},
                                                                       force=True)
    handle = parse("run X --args @args:3f9a1c2b")
    assert parse(run_command_text(handle)) == handle  # type: ignore[arg-type]


def test_preview_cut_at_160_with_ellipsis() -> None:
    assert preview("a" * 160) == "a" * 160
    assert preview("a" * 161) == "a" * 160 + "…"
    assert preview("line one\nline   two") == "line one line two"
    assert preview(None) == ""


def test_gates_addressed_by_thread_direct_mention_never_chatter() -> None:
    run_a, run_b = make_run(id="a", thread="T1"), make_run(id="b", thread="T2")
    gates = [(run_a, make_gate(run_a)), (run_b, make_gate(run_b))]
    threads = {"T1": {"a"}, "T2": {"b"}, "T3": {"done"}}  # T3: the thread of a completed run

    def ids(thread: str | None = None, direct: bool = False, mentions: bool = False) -> list[str]:
        in_thread = threads.get(thread or "", set())
        addressed = gates_addressed(gates, thread_runs=in_thread, direct=direct, mentions_bot=mentions)
        return [r.id for r, _ in addressed]

    assert ids(thread="T1") == ["a"]
    assert ids(thread="T1", mentions=True) == ["a"]  # a run's thread addresses that run only
    assert ids() == []  # chatter in the channel
    assert ids(thread="other") == []  # chatter in a thread that is no run's
    assert ids(thread="other", mentions=True) == ["a", "b"]  # ... a mention there: the conversation's
    assert ids(mentions=True) == ["a", "b"]
    assert ids(direct=True) == ["a", "b"]
    # another run's thread, even a finished run's, never decides these gates
    assert ids(thread="T3") == []
    assert ids(thread="T3", mentions=True) == []
    assert ids(thread="T3", direct=True) == []


def test_next_commands_follow_the_status_and_paste_back() -> None:
    kinds = {status: [k for k, _ in next_commands(make_run(id="r1", status=status), None, gate_waiting=False,
                                                    may_decide=False)] for status in RunStatus}  # fmt: skip
    assert kinds[RunStatus.FAILED] == ["resume", "plan", "resume_from", "fresh", "abandon"]
    assert kinds[RunStatus.QUEUED][-1] == "dequeue" and kinds[RunStatus.RUNNING][-1] == "stop"
    assert kinds[RunStatus.COMPLETED] == ["plan", "resume_from", "fresh"]
    waiting = dict(next_commands(PAUSED, 'say "hi" `x`', gate_waiting=True, may_decide=True))
    assert waiting["approve"] == f"approve {PAUSED.id}" and waiting["reject"] == f"reject {PAUSED.id}"
    assert "resume" not in waiting
    fresh = parse(waiting["fresh"])
    assert isinstance(fresh, RunCommand) and fresh.force and fresh.message == 'say "hi" `x`'
    assert "approve" not in dict(next_commands(PAUSED, None, gate_waiting=True, may_decide=False))
