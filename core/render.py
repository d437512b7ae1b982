"""Replies to text: one jinja2 environment over `templates/`, each platform's format, secret
redaction and splitting to the platform's limit.

Core knows no platform by name. Each platform's adapter owns its `Format` (template folder,
message limit, whether code blocks keep a language, its escaping and the jinja2 filters its
templates use) and `register`s it; `pyproject.toml` names each format under the entry-point
group `baton.formats` (and the one that stands in for a platform with no format of its own as
`default`), so a process that renders for a platform it has not imported yet finds it there.

`render(reply, platform, redactor) -> list[str]` renders `templates/<folder>/<kind>.j2` and
splits the text into chunks within the platform's limit (none: one chunk). The splitting is
`core.splitting`: fences balanced in each chunk (a fence closes only with one at least its own
length), no inline code span, mention or emoji cut, no empty code block, nothing dropped.
`render_reply` also says whether every code span stayed whole (else the adapter attaches the
whole text as a file).

Redaction (with the runtime's one `Redactor`, a required argument): every string of the
reply's data and buttons is redacted before templating (so a preview cut at 160 characters
never shows half a secret), and the rendered text again after it, also in the forms the
platform's escaping gives a secret (`Format.escapes`). Adapters send `redacted(reply,
redactor)`'s buttons, so a button's label or command never carries a secret either.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import re
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.commands.messages import Button, Menu, Reply
from core.commands.resolution import preview
from core.principals import PERSON_IN_TEXT
from core.redaction import Redactor
from core.splitting import Chunk, split_chunks, width

if TYPE_CHECKING:  # jinja2 is imported when the first reply is rendered
    from jinja2 import BytecodeCache, Environment

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
#: where `pyproject.toml` names each platform's `Format` (and the `default` one)
ENTRY_POINTS = "baton.formats"

__all__ = ("Chunk", "Format", "Rendered", "format_of", "platforms", "register", "render", "render_reply",
           "render_text", "sentence", "split_chunks", "width")


# -- platforms' formats ------------------------------------------------------------------


@dataclass(frozen=True)
class Format:
    """How one platform shows a reply: its templates (`templates/<templates>/<kind>.j2`), the most
    one message holds (None: no limit), whether a code block keeps its language, the forms its
    escaping gives a secret (redacted in rendered text too), and the filters its templates use."""

    name: str
    templates: str
    limit: int | None = None
    code_languages: bool = True
    escapes: tuple[Callable[[str], str], ...] = ()
    filters: Mapping[str, Callable[..., Any]] = field(default_factory=dict)

    def said(self, name: str, *args: Any) -> str:
        """One of this platform's own sentences (`sentence`): `said("not_in_channel", …)`."""
        return sentence(self, name, *args)


_formats: dict[str, Format] = {}
_default: list[Format] = []  # the format of a platform that has none of its own
_environments: weakref.WeakSet[Environment] = weakref.WeakSet()  # each takes new formats' filters


def register(fmt: Format, *, default: bool = False) -> Format:
    """`fmt` is how its platform shows replies (`default`: also every platform without one)."""
    _formats[fmt.name] = fmt
    if default:
        _default[:] = [fmt]
    for env in _environments:
        env.filters.update(fmt.filters)
    return fmt


def _discover(name: str) -> Format | None:
    """The format `pyproject.toml` names for `name` (loading it registers it), if any."""
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINTS, name=name):
        fmt = point.load()
        return register(fmt, default=name == "default")
    return None


def format_of(platform: str | Format) -> Format:
    """`platform`'s format (an adapter may hand its own); a platform with none of its own is
    shown in the default one."""
    if isinstance(platform, Format):
        return platform
    found = _formats.get(platform) or _discover(platform)
    if found is not None:
        return found
    if not _default and _discover("default") is None:
        raise LookupError(f"no format for platform {platform!r} and no default one: is Baton installed?")
    return _default[0]


def platforms() -> tuple[str, ...]:
    """Every platform with a format of its own, as installed (nothing is imported)."""
    from importlib.metadata import entry_points

    named = {p.name for p in entry_points(group=ENTRY_POINTS)} - {"default"}
    return tuple(sorted(named | _formats.keys()))


# -- escaping filters ------------------------------------------------------------------


#: A balanced inline code span of single backticks (as chat markdowns write one): `/workflow status 3f9a`
INLINE_CODE = re.compile(r"(?<!`)(`[^`\n]+`)(?!`)")


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




def people(text: object) -> list[dict[str, str]]:
    """`text` split around the user ids in it: `{"text": …}` and `{"user": …}` pieces, for the
    templates to show each person as the platform shows people (a mention, a plain name)."""
    parts: list[dict[str, str]] = []
    for index, piece in enumerate(PERSON_IN_TEXT.split(str(text))):
        if piece:
            parts.append({"user": piece} if index % 2 else {"text": piece})
    return parts


#: people's names for the reply being rendered (`render_text(names=…)`): user id -> name
_NAMES: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar("baton_names", default={})  # noqa: B039


def name_of(user: object) -> str | None:
    """The name the platform's adapter found for `user` (`<platform>:<id>`), or None; untrusted
    text the template escapes like any other (the platform's `_fmt.j2`, `user`)."""
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
        code_span=code_span,
        code_block=code_block,
        truncate_preview=truncate_preview,
        people=people,
        seconds=lambda s: f"{float(s or 0):.1f}s",
        duration=duration,
        json=lambda v: json.dumps(v, ensure_ascii=False, sort_keys=True, default=str),
        timestamp=lambda t: time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(float(t))) + "Z",
    )
    env.globals["name_of"] = name_of
    for fmt in _formats.values():
        env.filters.update(fmt.filters)
    _environments.add(env)
    return env


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


def render_text(reply: Reply, platform: str | Format, redactor: Redactor, root: Path = TEMPLATES, *,
                names: Mapping[str, str] | None = None) -> str:
    """The whole reply as text for `platform`, with no secret `redactor` knows in it. `names`:
    the people's names the adapter knows (user id -> name), shown instead of a mention where a
    ping is not meant."""
    fmt = format_of(platform)
    clean = redacted(reply, redactor)
    template = environment(root).get_template(f"{fmt.templates}/{clean.kind}.j2")
    token = _NAMES.set(names or {})
    try:
        text = template.render(reply=clean, data=clean.data, buttons=clean.buttons, platform=fmt.templates)
    finally:
        _NAMES.reset(token)
    if redactor:
        text = redactor.forms(*fmt.escapes).redact(text)
    return text.strip("\n")


def sentence(platform: str | Format, name: str, *args: Any, **data: Any) -> str:
    """One of a platform's own sentences, about its mechanics rather than a reply (an upload,
    an expired button, a channel the bot is not in): the macro `name` of
    `templates/<folder>/_said.j2`, called with `args` and `data`."""
    fmt = format_of(platform)
    said = environment().get_template(f"{fmt.templates}/_said.j2").module
    return str(getattr(said, name)(*args, **data)).strip("\n")


@dataclass(frozen=True, slots=True)
class Rendered:
    """A reply as text for one platform: `text` whole, and `chunks` within the platform's limit.
    `whole` is False when a code span (a command to copy) was too wide for one chunk and had to
    be cut: the adapter then attaches `text` as a file, where every command is whole."""

    text: str
    chunks: tuple[str, ...]
    whole: bool


def render_reply(reply: Reply, platform: str | Format, redactor: Redactor, *,
                 names: Mapping[str, str] | None = None) -> Rendered:
    """The reply as text and as chunks within `platform`'s limit (core.splitting: code fences
    balanced in each, no code span, mention or emoji cut), secrets hidden. `names`: see
    `render_text`."""
    fmt = format_of(platform)
    text = render_text(reply, fmt, redactor, names=names)
    if fmt.limit is None:
        return Rendered(text, (text,), True)
    chunks = split_chunks(text, fmt.limit, languages=fmt.code_languages)
    return Rendered(text, tuple(c.text for c in chunks), all(c.whole for c in chunks))


def render(reply: Reply, platform: str | Format, redactor: Redactor, *,
           names: Mapping[str, str] | None = None) -> list[str]:
    """The reply as chunks within `platform`'s limit, code fences balanced in each, secrets hidden."""
    return list(render_reply(reply, platform, redactor, names=names).chunks)
