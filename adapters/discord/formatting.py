"""How Discord shows a reply: `templates/discord/`, 2,000 characters per message, code blocks
keep their language, and markdown escaping (mentions are left as written: every message is
posted with `AllowedMentions.none()`). Registered with `core.render` on import (and named in
`pyproject.toml` under `baton.formats`)."""

from __future__ import annotations

import re

from core.render import INLINE_CODE, Format, register

_DISCORD_SPECIALS = re.compile(r"([\\*_~`|\[\]])")
_DISCORD_LINE_START = re.compile(r"^(\s*)([>#\-+])", re.MULTILINE)
_DISCORD_NUMBERED = re.compile(r"^(\s*\d+)\.(?=\s)", re.MULTILINE)  # "1. item": a list


def discord_escape(text: object) -> str:
    """Discord markdown specials escaped. A balanced inline code span (our hints' `/workflow
    status 3f9a`) stays code: nothing inside it formats, and nothing outside it can reach in.
    Mentions (`<@id>`, @everyone) are left as written, with no zero-width space: they show as
    names and never ping, since every message is posted with `AllowedMentions.none()`."""
    parts = INLINE_CODE.split(str(text))
    for index in range(0, len(parts), 2):  # the text between code spans
        out = _DISCORD_SPECIALS.sub(r"\\\1", parts[index])
        out = _DISCORD_LINE_START.sub(r"\1\\\2", out)
        parts[index] = _DISCORD_NUMBERED.sub(r"\1\\.", out)
    return "".join(parts)


FORMAT = register(Format(
    name="discord",
    templates="discord",
    limit=2000,
    escapes=(discord_escape,),  # how a secret may look once escaped
    filters={"discord_escape": discord_escape},
))

