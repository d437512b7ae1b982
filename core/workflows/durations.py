"""Durations as workflow authors write them (`90s`, `30m`, `4h`, `1h30m`, `2d`) and as people read them.

`parse_duration` accepts a number of seconds or the text form (units d, h, m, s, largest first,
each at most once) and returns seconds; `show_duration` gives the short form a gate message
shows ("3h 59m", "2d 4h", "45s"). Pure.
"""

from __future__ import annotations

import re
from typing import Any

_TEXT = re.compile(r"^(?:(?P<d>\d+)d)?(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+)s)?$")
_UNIT = {"d": 86400, "h": 3600, "m": 60, "s": 1}
#: the longest a gate may wait, remind or escalate after (GitHub environments: 30 days)
MAX_SECONDS = 30 * 86400


def parse_duration(value: Any) -> float:
    """Seconds for `value` (a positive number of seconds, or text like `1h30m`); ValueError
    with the accepted forms otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration; write e.g. 30m, 4h, 1h30m or 2d")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        match = _TEXT.match(value.strip().replace(" ", ""))
        if not value.strip() or match is None or not any(match.groupdict().values()):
            raise ValueError(f"{value!r} is not a duration; write e.g. 30m, 4h, 1h30m or 2d")
        seconds = float(sum(int(n) * _UNIT[u] for u, n in match.groupdict().items() if n))
    else:
        raise ValueError(f"{value!r} is not a duration; write e.g. 30m, 4h, 1h30m or 2d")
    if not 0 < seconds <= MAX_SECONDS:
        raise ValueError(f"{value!r} is out of range; a duration is more than 0s and at most 30d")
    return seconds


def show_duration(seconds: float) -> str:
    """"3h 59m", "2d 4h", "12m", "45s": the two largest units, rounded down; "0s" when due."""
    left = max(0, int(seconds))
    parts: list[str] = []
    for unit, size in _UNIT.items():
        if left >= size or (unit == "s" and not parts):
            parts.append(f"{left // size}{unit}")
            left %= size
        if len(parts) == 2:
            break
    return " ".join(p for p in parts if not (p.startswith("0") and len(parts) > 1)) or "0s"
