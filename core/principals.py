"""How principals are written: a person or an agent by immutable platform id, a group, anyone.

Shared by the settings (`BATON_ACCESS`, `core/config.py`), the workflow checks of a gate's
`approvers:` (`core/workflows/approval_checks.py`) and the approval policy; it imports nothing
of Baton, so each of them may read it.
"""

from __future__ import annotations

import re

#: A person, by immutable platform id: `slack:U024BE7LH` (U… or W…), `discord:80351110224678912`
#: (a snowflake), `console:ana` (the console's user name), `mcp:ci-agent` (an agent driving Baton
#: through MCP: `BATON_MCP_PRINCIPAL`, or a name of `BATON_MCP_TOKENS`). Never a display name.
USER_ID = re.compile(
    r"slack:[UW][A-Z0-9]+|discord:[0-9]{1,20}|console:[^\s:*]+|mcp:[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
)
#: An agent's name in `BATON_MCP_TOKENS` (its principal is `mcp:<name>`).
AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
AGENT_PREFIX = "mcp:"
GROUP_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
GROUP_PREFIX = "group:"
#: One person, whichever platform account they use (BATON_ACCESS's `people`): a quorum counts
#: them once. Never written by anyone: Baton derives it from an id.
PERSON_PREFIX = "person:"
ANYONE = "*"
#: A person's id inside a sentence Baton wrote ("invalidated by console:ana"); a console name
#: does not take a sentence's closing punctuation with it.
PERSON_IN_TEXT = re.compile(r"\b(slack:[UW][A-Z0-9]+|discord:[0-9]{1,20}|console:[\w@.-]*[\w@-])")
