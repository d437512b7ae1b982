"""Replies to text: one jinja2 environment over `templates/`, per-platform escaping, secret
redaction and splitting to platform limits.

`render(reply, platform, redactor) -> list[str]` renders `templates/<platform>/<kind>.j2` (an unknown
platform falls back to `templates/console/`) and splits the text into chunks within the
platform's limit: Discord 2,000 UTF-16 units per message, Slack 3,000 per section block, the
console unlimited. The splitting is `core.splitting`: fences balanced in each chunk (a fence
closes only with one at least its own length), no inline code span, mention or emoji cut, no
empty code block, nothing dropped. `render_reply` also says whether every code span stayed
whole (else the adapter attaches the whole text as a file).

Redaction (with the runtime's one `Redactor`, a required argument): every string of the
reply's data and buttons is redacted before templating (so a preview cut at 160 characters
never shows half a secret), and the rendered text again after it, also in the forms the
platform's escaping gives a secret (`_ESCAPES`). Adapters send `redacted(reply, redactor)`'s
buttons, so a button's label or command never carries a secret either.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from core.commands.messages import Button, Menu, Reply
from core.commands.resolution import preview
from core.redaction import Redactor
from core.splitting import Chunk, split_chunks, width

if TYPE_CHECKING:  # jinja2 is imported when the first reply is rendered
    from jinja2 import BytecodeCache, Environment

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
PLATFORMS = ("console", "slack", "discord")
LIMITS: dict[str, int | None] = {"console": None, "slack": 3000, "discord": 2000}

__all__ = ("LIMITS", "PLATFORMS", "Chunk", "Rendered", "render", "render_reply", "render_text",
           "split_chunks", "width")


# -- escaping filters ------------------------------------------------------------------


def slack_escape(text: object) -> str:
    """Slack mrkdwn control characters as entities: no user text can ping <!channel>."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


#: Slack's mrkdwn has no escape for its formatting characters: text shows a look-alike
#: instead, where the character could open or close a style (a `_` inside a word, as in
#: `deploy_prod`, formats nothing and stays as it is).
_SLACK_LOOKALIKES = {"*": "\u2217", "_": "\u02cd", "~": "\u223c", "`": "\u02cb"}
#: A balanced inline code span of single backticks (Slack's and Discord's): `/workflow status 3f9a`
_SLACK_CODE_SPAN = re.compile(r"(?<!`)(`[^`\n]+`)(?!`)")
_SLACK_STYLE = re.compile(r"(?<![0-9A-Za-z])[*_~]|[*_~](?![0-9A-Za-z])|`")
_SLACK_QUOTE = re.compile(r"^(\s*)&gt;", re.MULTILINE)


def slack_text(text: object) -> str:
    """Text that cannot change the formatting of the message it is put in: `&`, `<`, `>` as
    entities (no mention, no link), `*x*`, `_x_`, `~x~` and stray backticks (a lone ```
    included) as look-alikes, a `>` opening a line kept from quoting the rest. A balanced
    inline code span (our hints' `/workflow status 3f9a`) stays code: nothing inside it formats."""
    parts = _SLACK_CODE_SPAN.split(slack_escape(text))
    for index in range(0, len(parts), 2):  # the text between code spans
        parts[index] = _SLACK_STYLE.sub(lambda m: _SLACK_LOOKALIKES[m.group(0)], parts[index])
    return _SLACK_QUOTE.sub("\\1\u00ad&gt;", "".join(parts))


_DISCORD_SPECIALS = re.compile(r"([\\*_~`|\[\]])")
_DISCORD_LINE_START = re.compile(r"^(\s*)([>#\-+])", re.MULTILINE)
_DISCORD_NUMBERED = re.compile(r"^(\s*\d+)\.(?=\s)", re.MULTILINE)  # "1. item": a list


def discord_escape(text: object) -> str:
    """Discord markdown specials escaped. A balanced inline code span (our hints' `/workflow
    status 3f9a`) stays code: nothing inside it formats, and nothing outside it can reach in.
    Mentions (`<@id>`, @everyone) are left as written, with no zero-width space: they show as
    names and never ping, since every message is posted with `AllowedMentions.none()`."""
    parts = _SLACK_CODE_SPAN.split(str(text))
    for index in range(0, len(parts), 2):  # the text between code spans
        out = _DISCORD_SPECIALS.sub(r"\\\1", parts[index])
        out = _DISCORD_LINE_START.sub(r"\1\\\2", out)
        parts[index] = _DISCORD_NUMBERED.sub(r"\1\\.", out)
    return "".join(parts)


def _longest_run(text: str, ch: str = "`") -> int:
    return max((len(m) for m in re.findall(f"{re.escape(ch)}+", text)), default=0)


def code_span(text: object) -> str:
    """A CommonMark code span that survives backticks inside it (fence longer than any run)."""
    s = str(text)
    fence = "`" * (_longest_run(s) + 1)
    pad = s.startswith("`") or s.endswith("`") or (s[:1] == " " and s[-1:] == " " and s.strip() != "")
    return f"{fence} {s} {fence}" if pad else f"{fence}{s}{fence}"


def code_block(text: object, lang: str = "") -> str:
    """A fenced code block whose fence is longer than any backtick run inside."""
    s = str(text).rstrip("\n")
    fence = "`" * max(3, _longest_run(s) + 1)
    return f"{fence}{lang}\n{s}\n{fence}"


def slack_code(text: object) -> str:
    """Slack has no escapes in code: inline when free of backticks, else a ``` block."""
    s = slack_escape(text)
    if "`" not in s and "\n" not in s:
        return f"`{s}`"
    return "```" + s.replace("```", "`\u200b``") + "```"


def slack_code_block(text: object) -> str:
    s = slack_escape(str(text).rstrip("\n"))
    return "```\n" + s.replace("```", "`\u200b``") + "\n```"


#: A person's id inside a sentence Baton wrote ("invalidated by console:ana"); a console name
#: does not take a sentence's closing punctuation with it.
_PERSON = re.compile(r"\b(slack:[UW][A-Z0-9]+|discord:[0-9]{1,20}|console:[\w@.-]*[\w@-])")


def people(text: object) -> list[dict[str, str]]:
    """`text` split around the user ids in it: `{"text": …}` and `{"user": …}` pieces, for the
    templates to show each person as the platform shows people (a mention, a plain name)."""
    parts: list[dict[str, str]] = []
    for index, piece in enumerate(_PERSON.split(str(text))):
        if piece:
            parts.append({"user": piece} if index % 2 else {"text": piece})
    return parts


#: people's names for the reply being rendered (`render_text(names=…)`): user id -> name
_NAMES: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar("baton_names", default={})  # noqa: B039


def name_of(user: object) -> str | None:
    """The name the platform's adapter found for `user` (`slack:U…`), or None; untrusted text
    the template escapes like any other (`templates/slack/_fmt.j2`, `user`)."""
    return _NAMES.get().get(str(user))


def duration(seconds: object) -> str:
    """`43200` -> `12h`, `5400` -> `1h 30m`, `90` -> `1m 30s`: how long, for people."""
    total = max(0, round(float(seconds or 0)))  # type: ignore[arg-type]
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "",
             f"{secs}s" if secs and not hours else ""]
    return " ".join(p for p in parts if p) or "0s"


def truncate_preview(text: object, limit: int = 160) -> str:
    return preview(None if text is None else str(text), limit)


# -- environment -----------------------------------------------------------------------


def _bytecode_cache() -> BytecodeCache | None:
    """Compiled templates kept on disk like `.pyc` files, so a new process (`baton say`, a
    relaunch) does not parse and compile each reply template again (≈ 20 ms a template).
    jinja2's own per-user directory under the temp dir, created private (0700) and refused
    if another user owns it; an entry is used only while its template's source is unchanged.
    None (compile every time) when no such directory can be had."""
    from jinja2 import FileSystemBytecodeCache
    from jinja2.bccache import Bucket

    class BestEffort(FileSystemBytecodeCache):
        """A cache that cannot be read or written (a full disk) costs a compile, never a reply."""

        def load_bytecode(self, bucket: Bucket) -> None:
            try:
                super().load_bytecode(bucket)
            except (OSError, EOFError, ValueError):
                bucket.reset()

        def dump_bytecode(self, bucket: Bucket) -> None:
            with contextlib.suppress(OSError):
                super().dump_bytecode(bucket)

    try:
        return BestEffort()
    except (OSError, RuntimeError):
        return None


@cache
def environment(root: Path = TEMPLATES) -> Environment:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(
        bytecode_cache=_bytecode_cache(),
        loader=FileSystemLoader(str(root)),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        keep_trailing_newline=False,
    )
    env.filters.update(
        slack_escape=slack_escape,
        slack_text=slack_text,
        discord_escape=discord_escape,
        code_span=code_span,
        code_block=code_block,
        slack_code=slack_code,
        slack_code_block=slack_code_block,
        truncate_preview=truncate_preview,
        people=people,
        seconds=lambda s: f"{float(s or 0):.1f}s",
        duration=duration,
        json=lambda v: json.dumps(v, ensure_ascii=False, sort_keys=True, default=str),
        timestamp=lambda t: time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(float(t))) + "Z",
    )
    env.globals["name_of"] = name_of
    return env


def template_platform(platform: str, root: Path = TEMPLATES) -> str:
    return platform if (root / platform).is_dir() else "console"


#: how each platform's escaping may rewrite a secret inside rendered text
_ESCAPES: dict[str, tuple[Callable[[str], str], ...]] = {
    "console": (),
    "slack": (slack_escape, slack_text),
    "discord": (discord_escape,),
}


def redacted(reply: Reply, redactor: Redactor) -> Reply:
    """`reply` with every secret hidden in what people see of it: its data, its buttons' and
    choice lists' labels and commands, and its run id (an error names the id as it was typed)."""
    if not redactor:
        return reply
    options = [o for menu in reply.menus for o in menu.options]
    shown = (reply.data, [(b.label, b.command) for b in (*reply.buttons, *options)],
             [m.placeholder for m in reply.menus], reply.run_id)  # fmt: skip
    if redactor.redact_value(shown) is shown:  # nothing to hide: the reply as it is
        return reply

    def hide(buttons: tuple[Button, ...]) -> tuple[Button, ...]:
        return tuple(
            dataclasses.replace(b, label=redactor.redact(b.label), command=redactor.redact(b.command))
            for b in buttons
        )

    menus = tuple(Menu(redactor.redact(m.placeholder), hide(m.options)) for m in reply.menus)
    run_id = redactor.redact(reply.run_id) if reply.run_id is not None else None
    data = redactor.redact_value(dict(reply.data))
    return dataclasses.replace(reply, data=data, buttons=hide(reply.buttons), menus=menus, run_id=run_id)


def render_text(reply: Reply, platform: str, redactor: Redactor, root: Path = TEMPLATES, *,
                names: Mapping[str, str] | None = None) -> str:
    """The whole reply as text for `platform`, with no secret `redactor` knows in it. `names`:
    the people's names the adapter knows (user id -> name), shown instead of a mention where a
    ping is not meant (Slack)."""
    where = template_platform(platform, root)
    clean = redacted(reply, redactor)
    template = environment(root).get_template(f"{where}/{clean.kind}.j2")
    token = _NAMES.set(names or {})
    try:
        text = template.render(reply=clean, data=clean.data, buttons=clean.buttons, platform=where)
    finally:
        _NAMES.reset(token)
    if redactor:
        text = redactor.forms(*_ESCAPES.get(where, ())).redact(text)
    return text.strip("\n")


@dataclass(frozen=True, slots=True)
class Rendered:
    """A reply as text for one platform: `text` whole, and `chunks` within the platform's limit.
    `whole` is False when a code span (a command to copy) was too wide for one chunk and had to
    be cut: the adapter then attaches `text` as a file, where every command is whole."""

    text: str
    chunks: tuple[str, ...]
    whole: bool


def render_reply(reply: Reply, platform: str, redactor: Redactor, *,
                 names: Mapping[str, str] | None = None) -> Rendered:
    """The reply as text and as chunks within `platform`'s limit (core.splitting: code fences
    balanced in each, no code span, mention or emoji cut), secrets hidden. `names`: see
    `render_text`."""
    text = render_text(reply, platform, redactor, names=names)
    where = template_platform(platform)
    limit = LIMITS.get(where)
    if limit is None:
        return Rendered(text, (text,), True)
    chunks = split_chunks(text, limit, languages=where != "slack")  # Slack has no code languages
    return Rendered(text, tuple(c.text for c in chunks), all(c.whole for c in chunks))


def render(reply: Reply, platform: str, redactor: Redactor, *,
           names: Mapping[str, str] | None = None) -> list[str]:
    """The reply as chunks within `platform`'s limit, code fences balanced in each, secrets hidden."""
    return list(render_reply(reply, platform, redactor, names=names).chunks)
