"""The few sentences that exist only because of Slack's mechanics (uploads, button clicks,
channel membership), worded in `templates/slack/_said.j2` like every reply: `wording.moved(run,
channel, error)` says its macro `moved`. Each error is one line of cause and one of next step.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from adapters.slack.formatting import FORMAT
from core.render import sentence


def __getattr__(name: str) -> Callable[..., str]:
    if name.startswith("__"):
        raise AttributeError(name)
    return functools.partial(sentence, FORMAT, name)
