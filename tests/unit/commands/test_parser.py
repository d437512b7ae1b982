from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.commands.model import (
    SPECS,
    AbandonCommand,
    ApproveCommand,
    ArgsCommand,
    AuditCommand,
    CancelCommand,
    HelpCommand,
    InvalidateCommand,
    ListCommand,
    OpenCommand,
    PlanCommand,
    RejectCommand,
    ResolveCommand,
    ResumeCommand,
    RunCommand,
    RunsCommand,
    StatusCommand,
)
from core.commands.parser import as_command, parse
from core.commands.quoting import quote_word, split_words
from core.errors import UsageError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("resume 3f9a", ResumeCommand("3f9a")),
        ("approve 3f9a looks good", ApproveCommand("3f9a", "looks good", ("looks", "good"))),
        ("approve 3f9a", ApproveCommand("3f9a", None)),
        ("reject 3f9a 'too risky'", RejectCommand("3f9a", "too risky")),
        ("abandon 3f9a", AbandonCommand("3f9a")),
        ("cancel 3f9a", CancelCommand("3f9a")),
        ("resolve 3f9a publish done", ResolveCommand("3f9a", "publish", "done")),
        ('resolve 3f9a pub DONE --output "by hand"', ResolveCommand("3f9a", "pub", "done", "by hand")),
        ("resolve 3f9a publish retry", ResolveCommand("3f9a", "publish", "retry")),
        ("invalidate 3f9a draft", InvalidateCommand("3f9a", "draft", False)),
        ("invalidate 3f9a draft --downstream", InvalidateCommand("3f9a", "draft", True)),
        ("plan 3f9a", PlanCommand("3f9a")),
        ("status", StatusCommand(None)),
        ("status 3f9a", StatusCommand("3f9a")),
        ("runs", RunsCommand()),
        ("runs --open", RunsCommand(open=True)),
        ("runs --workflow deploy --status failed", RunsCommand(workflow="deploy", status="failed")),
        ("open", OpenCommand()),
        ("open 3f9a", OpenCommand("3f9a")),
        ("list", ListCommand()),
        ("args 3f9a", ArgsCommand("3f9a")),
        ("audit 3f9a", AuditCommand("3f9a")),
        ("help", HelpCommand(None)),
        ("help run", HelpCommand("run")),
        ("", HelpCommand(None)),
        ("/workflow status", StatusCommand(None)),
        ("RESUME 3f9a", ResumeCommand("3f9a")),
    ],
)
def test_every_subcommand_parses(text: str, expected: object) -> None:
    assert parse(text) == expected


def test_every_spec_example_parses_to_its_own_command() -> None:
    for spec in SPECS.values():
        assert type(parse(spec.example)).__name__ == f"{spec.name.capitalize()}Command"


def test_run_message_words_are_joined_and_quotes_survive() -> None:
    cmd = parse('run release-notes fix the "big" bug')
    assert cmd == RunCommand("release-notes", message="fix the big bug")
    cmd = parse(r'''run X "say \"hi\", use `ls` and C:\\temp" 'it''s' ''')
    assert isinstance(cmd, RunCommand)
    assert cmd.message == 'say "hi", use `ls` and C:\\temp its'


@pytest.mark.parametrize("text", ["--force run X B", "run --force X B", "run X --force B", "run X B --force"])
def test_force_anywhere_is_stripped(text: str) -> None:
    assert parse(text) == RunCommand("X", message="B", force=True)


def test_quoted_force_is_text_not_a_flag() -> None:
    assert parse('run X "--force"') == RunCommand("X", message="--force")


def test_set_values_are_json_when_they_parse_and_dotted_paths_nest() -> None:
    cmd = parse('run X --set n=5 --set name=ana --set on=true --set a.b.c=\'{"k": [1]}\' --set=s="\\"5\\""')
    assert isinstance(cmd, RunCommand)
    assert [(s.path, s.value) for s in cmd.sets] == [
        (("n",), 5), (("name",), "ana"), (("on",), True), (("a", "b", "c"), {"k": [1]}), (("s",), "5"),
    ]


def test_args_json_handle_args_from_resume_from() -> None:
    assert parse("run X --args '{\"v\": 1}'") == RunCommand("X", args={"v": 1})
    assert parse("run X --args @args:3F9A1C2B") == RunCommand("X", args_handle="3f9a1c2b")
    assert parse("run X --args @3f9a") == RunCommand("X", args_handle="3f9a")
    assert parse("run X --args-from r1 go") == RunCommand("X", message="go", args_from="r1")
    assert parse("run X --resume-from r1 --set v=2") .resume_from == "r1"  # type: ignore[union-attr]


def test_double_dash_ends_options() -> None:
    assert parse("run X -- --set is text") == RunCommand("X", message="--set is text")


@pytest.mark.parametrize(
    ("text", "cause", "hint"),
    [
        ("rn X", "unknown command `rn`; did you mean `run`?", "/workflow help"),
        ("aprove 1", "did you mean `approve`?", "/workflow help"),
        ("frobnicate", "unknown command `frobnicate`", "/workflow help"),
        ("run X --forse", "did you mean `--force`?", "Usage: /workflow run <name>"),
        ("run X --sett a=1", "did you mean `--set`?", "Usage: /workflow run"),
        ("invalidate r n --downstreem", "did you mean `--downstream`?", "Usage: /workflow invalidate"),
        ("run", "`run` needs <name>", "Usage: /workflow run"),
        ("resume", "`resume` needs <run>", "Usage: /workflow resume <run>"),
        ("resume a b", "unexpected words", "Usage: /workflow resume <run>"),
        ("resolve r n dne", "did you mean `done`?", "Usage: /workflow resolve"),
        ("resolve r n retry --output x", "`--output` goes only with `done`", "Usage: /workflow resolve"),
        ("run X --set novalue", "key=value", "Usage: /workflow run"),
        ("run X --set 1a=2", "not a valid field name", "Usage: /workflow run"),
        ("run X --args '[1]'", "must be a JSON object", "Usage: /workflow run"),
        ("run X --args '{bad'", "not valid JSON", "Usage: /workflow run"),
        ("run X --args @zz", "not an args handle", "Usage: /workflow run"),
        ("run X --args '{}' --args-from r", "not both", "Usage: /workflow run"),
        ("run X --resume-from", "needs a value", "Usage: /workflow run"),
        ('run X "unclosed', "unbalanced quote", "Close the quote"),
        ("run X 'unclosed", "unbalanced quote", "Close the quote"),
        ("help nope", "unknown command `nope`", "/workflow help"),
        ("status a b", "at most one run id", "Usage: /workflow status"),
        ("who", "`who` asks who approved a run; ask `who approved <run>`", "Usage: /workflow who"),
        ("who 3f9a", "`who 3f9a` is not known; ask `who approved 3f9a`", "Usage: /workflow who"),
        ("who approved", "`who approved` needs <run>", "Usage: /workflow who"),
    ],
)
def test_errors_are_one_line_cause_and_one_line_next_step(text: str, cause: str, hint: str) -> None:
    with pytest.raises(UsageError) as info:
        parse(text)
    assert cause in info.value.message
    assert hint in info.value.hint
    assert "\n" not in info.value.message and "\n" not in info.value.hint


@given(st.text())
def test_quote_word_reads_back_verbatim(text: str) -> None:
    assert [w.text for w in split_words(quote_word(text))] == [text]


@given(st.text())
def test_split_never_crashes_on_any_text(text: str) -> None:
    try:
        split_words(text)
    except UsageError as exc:
        assert "unbalanced quote" in exc.message


def test_typographic_quotes_group_words() -> None:
    assert parse("run X \u201chello world\u201d") == RunCommand("X", message="hello world")


@pytest.mark.parametrize(
    "text",
    [
        "run x --args '" + "[" * 3000 + "]" * 3000 + "'",  # json.loads itself would recurse too deep
        "run x --args '" + '{"a":' * 40 + "1" + "}" * 40 + "'",
        "run x --set " + ".".join(["a"] * 3000) + "=1",
        "run x --set a=" + "[" * 3000 + "]" * 3000,
        "run x --set " + ".".join(["a"] * 20) + "=" + "[" * 20 + "]" * 20,  # path + value together
    ],
)
def test_deeply_nested_arguments_are_a_usage_error_not_a_crash(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse(text)
    assert "levels" in caught.value.message and caught.value.hint.startswith("Usage: /workflow run")


def test_ordinary_nesting_is_accepted() -> None:
    command = parse("""run x --args '{"a": {"b": [1, [2]]}}' --set 'c.d={"e":[3]}'""")
    assert isinstance(command, RunCommand)
    assert command.args == {"a": {"b": [1, [2]]}} and command.sets[0].value == {"e": [3]}


@pytest.mark.parametrize(
    ("text", "force"),
    [("run X B --force=true", True), ("run X B --force=yes", True), ("--force=1 run X B", True),
     ("run X B --force=false", False), ("run X B --force=no", False)],
)
def test_force_takes_a_truth_value_after_an_equals_sign(text: str, force: bool) -> None:
    assert parse(text) == RunCommand("X", message="B", force=force)


def test_force_with_another_value_says_it_is_a_switch() -> None:
    with pytest.raises(UsageError) as caught:
        parse("run X --force=later")
    assert caught.value.message == "`--force` is a switch, not `--force=later`"
    assert "did you mean" not in caught.value.message


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("status", "status"),
        ("help abandon", "help abandon"),
        ("--force run flaky x", "--force run flaky x"),
        ("--force=true run flaky x", "--force=true run flaky x"),
        ("/workflow run hello 'a  b'", "run hello 'a  b'"),
        ("/WORKFLOW", ""),
        ("approve 3f9a looks good", "approve 3f9a looks good"),
        ("RUNS", "RUNS"),
    ],
)
def test_a_message_to_the_bot_that_starts_with_a_command_is_that_command(text: str, command: str) -> None:
    assert as_command(text) == command


@pytest.mark.parametrize("text", ["approve", "reject", "Approve --force", "lgtm", "ship it", "", "runn x",
                                  "the status is fine", "--force"])
def test_replies_and_chatter_are_not_commands(text: str) -> None:
    assert as_command(text) is None


def test_runs_refuses_a_status_no_run_can_have_naming_the_valid_ones() -> None:
    with pytest.raises(UsageError) as info:
        parse("runs --status faild")
    assert "needs_attention" in info.value.message and "did you mean `failed`" in info.value.message
