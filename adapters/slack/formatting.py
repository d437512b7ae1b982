"""How Slack shows a reply: `templates/slack/`, 3,000 characters per chunk (one section block),
code blocks without a language (Slack has none), and mrkdwn escaping: user text can never ping,
link or format the message it is put in. Registered with `core.render` on import (and named in
`pyproject.toml` under `baton.formats`)."""

from __future__ import annotations

import re

from core.render import INLINE_CODE, Format, register


def slack_escape(text: object) -> str:
    """Slack mrkdwn control characters as entities: no user text can ping <!channel>."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


#: Slack's mrkdwn has no escape for its formatting characters: text shows a look-alike
#: instead, where the character could open or close a style (a `_` inside a word, as in
#: `deploy_prod`, formats nothing and stays as it is).
_SLACK_LOOKALIKES = {"*": "\u2217", "_": "\u02cd", "~": "\u223c", "`": "\u02cb"}
_SLACK_STYLE = re.compile(r"(?<![0-9A-Za-z])[*_~]|[*_~](?![0-9A-Za-z])|`")
_SLACK_QUOTE = re.compile(r"^(\s*)&gt;", re.MULTILINE)


def slack_text(text: object) -> str:
    """Text that cannot change the formatting of the message it is put in: `&`, `<`, `>` as
    entities (no mention, no link), `*x*`, `_x_`, `~x~` and stray backticks (a lone ```
    included) as look-alikes, a `>` opening a line kept from quoting the rest. A balanced
    inline code span (our hints' `/workflow status 3f9a`) stays code: nothing inside it formats."""
    parts = INLINE_CODE.split(slack_escape(text))
    for index in range(0, len(parts), 2):  # the text between code spans
        parts[index] = _SLACK_STYLE.sub(lambda m: _SLACK_LOOKALIKES[m.group(0)], parts[index])
    return _SLACK_QUOTE.sub("\\1\u00ad&gt;", "".join(parts))


def slack_code(text: object) -> str:
    """Slack has no escapes in code: inline when free of backticks, else a ``` block."""
    s = slack_escape(text)
    if "`" not in s and "\n" not in s:
        return f"`{s}`"
    return "```" + s.replace("```", "`\u200b``") + "```"


def slack_code_block(text: object) -> str:
    s = slack_escape(str(text).rstrip("\n"))
    return "```\n" + s.replace("```", "`\u200b``") + "\n```"


FORMAT = register(Format(
    name="slack",
    templates="slack",
    limit=3000,
    code_languages=False,
    escapes=(slack_escape, slack_text),  # how a secret may look once escaped
    filters={"slack_escape": slack_escape, "slack_text": slack_text, "slack_code": slack_code,
             "slack_code_block": slack_code_block},
))

