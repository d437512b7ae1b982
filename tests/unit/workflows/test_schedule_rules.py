"""When a schedule fires (pure): cron in a time zone with DST, intervals, the catch-up plan,
the rule in words; and `schedules:` refused at load with the line and the fix."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from core.commands.scheduler import plan
from core.errors import WorkflowDefinitionError
from core.workflows.loader import load_workflow_file
from core.workflows.schedule_rules import Rule, RuleError, local_time


def _at(tz: str, *args: int, fold: int = 0) -> float:
    from zoneinfo import ZoneInfo

    return dt.datetime(*args, tzinfo=ZoneInfo(tz), fold=fold).timestamp()  # type: ignore[misc]


def test_spring_forward_a_0230_schedule_fires_once_at_the_end_of_the_gap() -> None:
    """Europe/Paris, 2026-03-29: 02:00 becomes 03:00; 02:30 does not exist that day."""
    rule = Rule.of(cron="30 2 * * *", every=None, timezone="Europe/Paris")
    fires = rule.next_fires(_at("Europe/Paris", 2026, 3, 27, 12), 4)
    assert [local_time(t, "Europe/Paris") for t in fires] == [
        "2026-03-28 02:30:00 CET",
        "2026-03-29 03:00:00 CEST",
        "2026-03-30 02:30:00 CEST",
        "2026-03-31 02:30:00 CEST",
    ]
    assert fires[1] - fires[0] == 23.5 * 3600  # a short day: once, never skipped, never twice


def test_fall_back_a_0130_schedule_fires_once_the_first_time() -> None:
    """America/New_York, 2026-11-01: 01:00-02:00 happens twice; 01:30 fires once (EDT)."""
    rule = Rule.of(cron="30 1 * * *", every=None, timezone="America/New_York")
    fires = rule.next_fires(_at("America/New_York", 2026, 10, 31, 12), 3)
    assert [local_time(t, "America/New_York") for t in fires] == [
        "2026-11-01 01:30:00 EDT",
        "2026-11-02 01:30:00 EST",
        "2026-11-03 01:30:00 EST",
    ]
    # evaluated from inside the repeated hour (01:10 EST, after the first 01:30): not again
    second_hour = _at("America/New_York", 2026, 11, 1, 1, 10, fold=1)
    assert rule.due_between(second_hour, second_hour + 3600) == []
    # a tick that covers the whole night finds it once
    night = rule.due_between(
        _at("America/New_York", 2026, 10, 31, 23), _at("America/New_York", 2026, 11, 1, 6)
    )
    assert night == [fires[0]]


def test_every_is_anchored_and_bounded() -> None:
    rule = Rule.of(cron=None, every="5s", anchor=100.0)
    assert rule.due_between(100.0, 121.0) == [105.0, 110.0, 115.0, 120.0]
    assert rule.due_between(100.0, 100.0 + 5 * 10_000, limit=3) == [50090.0, 50095.0, 50100.0]
    assert rule.next_fires(103.0, 2) == [105.0, 110.0]
    assert rule.describe() == "Every 5s" and rule.text == "every 5s"


def test_the_rule_in_words_comes_from_cron_descriptor() -> None:
    assert Rule.of(cron="0 2 * * 1-5", every=None).describe() == "At 02:00, Monday through Friday"


@pytest.mark.parametrize(
    "cron, every, tz, says",
    [
        ("0 2 * * 1-9", None, "UTC", "not a cron expression"),
        ("0 2 * *", None, "UTC", "not a cron expression"),
        (None, "0s", "UTC", "out of range"),
        ("0 2 * * *", "5m", "UTC", "exactly one"),
        (None, None, "UTC", "exactly one"),
        ("0 2 * * *", None, "Mars/Olympus", "not a time zone"),
        ("0 2 30 2 *", None, "UTC", "never fires"),  # croniter reads it, and finds no date
        ("0 0 31 4,6 *", None, "UTC", "never fires"),
    ],
)
def test_bad_rules_are_refused_with_a_fix(cron: str | None, every: str | None, tz: str, says: str) -> None:
    with pytest.raises(RuleError) as caught:
        Rule.of(cron=cron, every=every, timezone=tz)
    assert says in caught.value.message and caught.value.hint


def test_a_rule_that_fires_rarely_is_kept_and_one_stored_before_that_never_fires_has_no_instants() -> None:
    leap = Rule.of(cron="0 0 29 2 *", every=None)  # every fourth year
    (first,) = leap.next_fires(0.0, 1)
    assert dt.datetime.fromtimestamp(first, dt.UTC).strftime("%m-%d %H:%M") == "02-29 00:00"
    stored = Rule(cron="0 2 30 2 *")  # a row written before the check, read back: no crash, no fire
    assert stored.next_fires(0.0, 3) == [] and stored.due_between(0.0, 4e9) == []


def test_the_catchup_plan() -> None:
    dues = [100.0, 200.0, 300.0]
    on_time = 310.0
    assert plan(dues, on_time, "latest", 3600) == [(100.0, False), (200.0, False), (300.0, True)]
    assert plan(dues, on_time, "none", 3600) == [(100.0, False), (200.0, False), (300.0, True)]
    assert plan(dues, on_time, "all", 3600) == [(100.0, True), (200.0, True), (300.0, True)]
    late = 1000.0  # the newest is not on time: the bot was down
    assert plan(dues, late, "latest", 3600) == [(100.0, False), (200.0, False), (300.0, True)]
    assert plan(dues, late, "none", 3600) == [(100.0, False), (200.0, False), (300.0, False)]
    assert plan(dues, late, "all", 750) == [(100.0, False), (200.0, False), (300.0, True)]  # the window
    assert plan(dues, 5000.0, "latest", 3600) == [(d, False) for d in dues]  # all outside the window
    assert plan([], 1.0, "latest", 3600) == []


WORKFLOW = """name: sched
schedules:
{schedules}
nodes:
  - id: x
    bash: echo hi
"""


@pytest.mark.parametrize(
    "schedules, line, says",
    [
        (
            '  - id: a\n    cron: "0 2 * * 1-9"',
            4,
            "`cron` of schedule `a`: `0 2 * * 1-9` is not a cron expression",
        ),
        (
            "  - id: a\n    every: 5m\n    timezone: Mars/Base",
            5,
            "`timezone` of schedule `a`: `Mars/Base` is not",
        ),
        ('  - id: a\n    cron: "* * * * *"\n    every: 5m', 5, "schedule `a` has both `cron` and `every`"),
        (
            "  - id: a\n    every: 5m\n    timezone: Europe/Paris",
            5,
            "schedule `a` has `every` and `timezone`: an interval has no time zone",
        ),
        ("  - id: a\n    overlap: skip", 3, "schedule `a` has neither `cron` nor `every`"),
        ("  - id: a\n    every: 5m\n    overlap: sometimes", 5, "`overlap` of schedule `a` is `sometimes`"),
        ("  - id: a\n    every: 5m\n  - id: a\n    every: 1h", 5, "schedule #2 repeats the id `a`"),
    ],
)
def test_bad_schedules_are_refused_at_load_with_line_and_fix(
    tmp_path: Path, schedules: str, line: int | None, says: str
) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text(WORKFLOW.format(schedules=schedules))
    with pytest.raises(WorkflowDefinitionError) as caught:
        load_workflow_file(path)
    assert says in caught.value.message, caught.value.message
    assert caught.value.hint
    if line is not None:
        assert caught.value.line == line


def test_a_good_schedule_loads(tmp_path: Path) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text(
        WORKFLOW.format(
            schedules='  - id: nightly\n    cron: "0  2 * * 1-5"\n    timezone: Europe/Paris\n'
            '    args: {message: hi}\n    as: "slack:U1"\n    catchup_window: 2h'
        )
    )
    (spec,) = load_workflow_file(path).schedules
    assert (spec.cron, spec.timezone, spec.as_, spec.window, spec.overlap, spec.catchup) == (
        "0 2 * * 1-5",
        "Europe/Paris",
        "slack:U1",
        7200.0,
        "skip",
        "latest",
    )
