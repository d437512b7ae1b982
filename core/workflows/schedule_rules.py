"""When a schedule fires: a cron expression in a time zone, or a fixed interval (pure).

    rule = Rule.cron("30 2 * * *", "Europe/Paris")      # or Rule.every(300.0, anchor=created_at)
    rule.due_between(after, until)   # the instants (epoch seconds) due in (after, until], in order
    rule.next_fires(after, 5)        # the next five
    rule.describe()                  # "At 02:30 AM" (cron-descriptor), "every 5m"

Cron expressions are read by `croniter` on the wall clock of the schedule's time zone and
each wall time is turned into an instant with `zoneinfo`, so daylight saving time does what a
person expects:

- a wall time that does not exist (the hour skipped when clocks spring forward: 02:30 in
  Europe/Paris on the last Sunday of March) fires once, at the first instant after the gap
  (03:00 local); several wall times inside one gap fire once;
- a wall time that happens twice (the hour repeated when clocks fall back: 01:30 in
  America/New_York on the first Sunday of November) fires once, the first time.

Intervals (`every: 15m`) are instants `anchor + k * every`: no time zone, no DST.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from core.workflows import check_memo
from core.workflows.durations import parse_duration, show_duration

UTC = "UTC"
#: the shortest interval a schedule may have (the tick's resolution is a second)
MIN_EVERY = 1.0
#: due instants enumerated at most by one evaluation (a long downtime of a minutely schedule)
MAX_DUE = 1000
#: what reads a cron expression (`check_memo`: an expression read as valid is not read again)
CRON_LIBRARIES = ("croniter",)


class RuleError(ValueError):
    """A rule that cannot be read: `message` says what, `hint` how to write it."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


@lru_cache(maxsize=512)
def zone(name: str) -> ZoneInfo:
    """The IANA time zone `name` (`Europe/Paris`); RuleError when unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise RuleError(f"`{name}` is not a time zone",
                        "Use an IANA name such as UTC, Europe/Paris or America/New_York.") from exc


def check_cron(expression: str) -> str:
    """The expression, normalised (single spaces), if croniter reads it; RuleError otherwise."""
    text = " ".join(str(expression).split())
    memo = check_memo.key("cron", CRON_LIBRARIES, text)
    if check_memo.passed(memo):  # read as valid before, by this croniter: not imported again
        return text
    from croniter import croniter  # imported where first used: only processes with schedules pay

    if len(text.split(" ")) != 5 or not croniter.is_valid(text):
        raise RuleError(f"`{expression}` is not a cron expression",
                        'Write five fields: minute hour day-of-month month day-of-week, e.g. "0 2 * * 1-5".')
    if not _fires(text):
        raise RuleError(f"`{expression}` never fires: no date has that day in that month",
                        'Pick a day the month has ("0 2 28 2 *"), or L for its last day ("0 2 L 2 *").')
    check_memo.remember(memo)
    return text


def _fires(text: str) -> bool:
    """Whether a valid cron expression ever matches a date (`0 2 30 2 *` never does: croniter
    reads it, and only fails when asked for its next time)."""
    from croniter import CroniterBadDateError, croniter

    try:
        croniter(text, dt.datetime(2000, 1, 1)).get_next(dt.datetime)  # 2000: a leap year follows
    except CroniterBadDateError:
        return False
    return True


def check_every(value: object) -> float:
    """Seconds of an interval (`5s`, `15m`, `1h30m`); RuleError otherwise."""
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise RuleError(str(exc), "Write an interval such as 30s, 15m, 1h or 1d.") from exc
    if seconds < MIN_EVERY:
        raise RuleError(f"`every: {value}` is shorter than {MIN_EVERY:g}s", "Use an interval of 1s or more.")
    return seconds


@dataclass(frozen=True, slots=True)
class Rule:
    """A cron expression in `timezone`, or an interval of `every` seconds from `anchor`."""

    cron: str | None = None
    every: float | None = None
    timezone: str = UTC
    anchor: float = 0.0

    @classmethod
    def of(cls, *, cron: str | None, every: float | str | None, timezone: str = UTC,
           anchor: float = 0.0) -> Rule:
        if (cron is None) == (every is None):
            raise RuleError("a schedule needs exactly one of `cron` and `every`",
                            'Give `cron: "0 2 * * *"` or `every: 15m`, not both.')
        zone(timezone)
        if cron is not None:
            return cls(cron=check_cron(cron), timezone=timezone)
        return cls(every=check_every(every), timezone=timezone, anchor=anchor)

    # -- instants ----------------------------------------------------------------------------
    def due_between(self, after: float, until: float, limit: int = MAX_DUE) -> list[float]:
        """The instants due in (`after`, `until`], oldest first; at most the newest `limit`."""
        if until <= after:
            return []
        if self.every is not None:
            step = self.every
            first = int((after - self.anchor) // step) + 1
            last = int((until - self.anchor) // step)
            first = max(first, last - limit + 1)
            return [self.anchor + k * step for k in range(first, last + 1)]
        found: list[float] = []
        for instant in self._cron_instants(after):
            if instant > until:
                break
            found.append(instant)
            if len(found) > limit:
                del found[0]
        return found

    def next_fires(self, after: float, count: int = 5) -> list[float]:
        """The next `count` instants due after `after`."""
        if self.every is not None:
            first = int((after - self.anchor) // self.every) + 1
            return [self.anchor + (first + k) * self.every for k in range(count)]
        out: list[float] = []
        for instant in self._cron_instants(after):
            out.append(instant)
            if len(out) == count:
                break
        return out

    def _cron_instants(self, after: float) -> Iterator[float]:
        """Instants of the cron expression after `after`, in order (DST: module docstring)."""
        from croniter import CroniterBadDateError, croniter

        tz = zone(self.timezone)
        start = dt.datetime.fromtimestamp(after, tz).replace(tzinfo=None)
        # an hour back on the wall clock: a wall time repeated by a fall-back still shows up once
        it = croniter(self.cron, start - dt.timedelta(hours=1))
        last = after
        for _ in range(1_000_000):  # croniter finds a match within years for any valid expression
            try:
                wall: dt.datetime = it.get_next(dt.datetime)
            except CroniterBadDateError:  # one that never fires (refused since `check_cron` knew)
                return
            instant = _instant(wall, tz)
            if instant > last:
                last = instant
                yield instant

    # -- words -------------------------------------------------------------------------------
    def describe(self) -> str:
        """The rule in words: cron-descriptor's reading of the expression, or "every 5m"."""
        if self.every is not None:
            return f"Every {show_duration(self.every)}"
        from cron_descriptor import Options, get_description

        options = Options()
        options.use_24hour_time_format = True
        return str(get_description(self.cron, options))

    @property
    def text(self) -> str:
        """The rule as written: the cron expression, or `every 5m`."""
        return self.cron if self.cron is not None else f"every {show_duration(self.every or 0)}"


def _instant(wall: dt.datetime, tz: ZoneInfo) -> float:
    """The instant a wall time names in `tz`: the first of two (fall-back), or the end of the
    gap for one that does not exist (spring-forward)."""
    first = wall.replace(tzinfo=tz, fold=0)
    if _exists(first):
        return first.timestamp()
    probe = wall.replace(second=0, microsecond=0)
    for _ in range(48 * 60):  # gaps last an hour, sometimes half of one; never two days
        probe += dt.timedelta(minutes=1)
        aware = probe.replace(tzinfo=tz, fold=0)
        if _exists(aware):
            return aware.timestamp()
    return first.timestamp()


def _exists(aware: dt.datetime) -> bool:
    """Whether the wall time survives a round trip through UTC (False: inside a DST gap)."""
    back = aware.astimezone(dt.UTC).astimezone(aware.tzinfo)
    return back.replace(tzinfo=None) == aware.replace(tzinfo=None)


def local_time(instant: float, timezone: str) -> str:
    """`2026-03-29 03:00 CEST`: an instant on the schedule's wall clock."""
    return dt.datetime.fromtimestamp(instant, zone(timezone)).strftime("%Y-%m-%d %H:%M:%S %Z")
