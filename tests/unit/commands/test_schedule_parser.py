"""`schedule …` parsed (pure): each action, its flags, and bad input answered with the usage."""

from __future__ import annotations

import pytest

from core.commands.model import ScheduleCommand, SetArg
from core.commands.parser import parse
from core.errors import UsageError


def test_add_with_cron_zone_overlap_message_and_sets() -> None:
    cmd = parse('schedule add report "0 2 * * 1-5" --tz Europe/Paris --overlap allow weekly sync --set n=3')
    assert cmd == ScheduleCommand(
        "add",
        "report",
        cron="0 2 * * 1-5",
        timezone="Europe/Paris",
        overlap="allow",
        message="weekly sync",
        sets=(SetArg(("n",), 3, "n=3"),),
    )


def test_add_every_and_the_other_actions() -> None:
    assert parse("schedule add hello every 5s") == ScheduleCommand("add", "hello", every="5s")
    assert parse("schedule list") == ScheduleCommand("list")
    assert parse("schedule show hello-ab12") == ScheduleCommand("show", "hello-ab12")
    assert parse("schedule pause hello-ab12 until Monday") == ScheduleCommand(
        "pause", "hello-ab12", note="until Monday"
    )
    assert parse("schedule resume hello-ab12") == ScheduleCommand("resume", "hello-ab12")
    assert parse("schedule run hello-ab12") == ScheduleCommand("run", "hello-ab12")
    assert parse("schedule rm hello-ab12") == ScheduleCommand("rm", "hello-ab12")


@pytest.mark.parametrize(
    "text, says",
    [
        ("schedule", "needs one of"),
        ("schedule ad hello every 5s", "did you mean `add`"),
        ("schedule add hello", "give the workflow and when"),
        ("schedule add hello 0 2 * * *", "neither a quoted cron expression"),
        ("schedule add hello every", "needs a duration"),
        ("schedule add hello every 5s --overlap skp", "did you mean `skip`"),
        ("schedule show", "`schedule show` needs <id>"),
        ("schedule run", "`schedule run` needs <id>"),
        ("schedule resume a back", "`schedule resume` takes only <id>, not `back`"),
        ("schedule run a now please", "`schedule run` takes only <id>, not `now please`"),
        ("schedule rm a b", "a note goes with `schedule pause <id> [note]`"),
        ("schedule list --tz UTC", "goes only with `schedule add`"),
    ],
)
def test_bad_input_gets_one_line_and_the_usage(text: str, says: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse(text)
    assert says in caught.value.message
    assert "schedule add <workflow>" in caught.value.usage
