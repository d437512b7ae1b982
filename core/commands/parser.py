"""`parse(text) -> Command`: the pure matcher for `/workflow …` text.

Match, then act: this module only turns words into a frozen command record or raises
`UsageError` with one line of cause and, as the next step, the subcommand's usage (or
the closest valid subcommand / flag).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from typing import Any

from core.commands.input_text import refuse, value_problem
from core.commands.model import (
    EXPORT_FORMATS,
    RESOLVE_ACTIONS,
    RUN_STATUSES,
    SCHEDULE_ACTIONS,
    SPECS,
    AbandonCommand,
    ApproveCommand,
    ArgsCommand,
    AuditCommand,
    CancelCommand,
    Command,
    HelpCommand,
    InvalidateCommand,
    ListCommand,
    OpenCommand,
    PinCommand,
    PlanCommand,
    QueueCommand,
    RejectCommand,
    ResolveCommand,
    ResumeCommand,
    RunCommand,
    RunsCommand,
    ScheduleCommand,
    SetArg,
    StatusCommand,
    SubscribeCommand,
    SubscriptionsCommand,
    UnpinCommand,
    UnsubscribeCommand,
    WhoCommand,
)
from core.commands.quoting import Word, split_words
from core.errors import UsageError

FORCE = "--force"
#: How deep `--args` / `--set` values (and `--set` paths) may nest: far beyond any real
#: arguments, far below what JSON encoding or decoding can recurse through.
MAX_NESTING = 32
_PREFIX = re.compile(r"^\s*/?workflow\b\s*", re.IGNORECASE)
_SLASH_PREFIX = re.compile(r"^\s*/workflow(?:\s+|$)", re.IGNORECASE)
_HANDLE = re.compile(r"^@?(?:args:)?([0-9a-fA-F]{4,64})$")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_TRUE = frozenset({"true", "yes", "1", "on"})
_FALSE = frozenset({"false", "no", "0", "off"})
#: Subcommands that are also replies to a gate: alone, they decide it (approval.py).
_DECISIONS = frozenset({"approve", "reject"})


def parse(text: str) -> Command:
    """Parse the text after `/workflow` (a leading `/workflow` is tolerated)."""
    words = split_words(_PREFIX.sub("", text, count=1))
    switches = [(w, _force_value(w)) for w in words]
    force = any(value for _, value in switches)
    words = [w for w, value in switches if value is None]
    if not words:
        return HelpCommand()
    sub, rest = words[0].text.lower(), words[1:]
    if sub not in SPECS:
        raise UsageError(f"unknown command `{words[0].text}`{_did_you_mean(sub, SPECS)}",
                         hint="Type `/workflow help` to see the commands you can use.")
    positional, options = _split_options(sub, rest)
    return _BUILDERS[sub](positional, options, force)


def _force_value(word: Word) -> bool | None:
    """`--force` (True), `--force=true|false|yes|no|1|0|on|off`, or None: not a `--force`."""
    if not word.is_flag:
        return None
    name, eq, value = word.text.partition("=")
    if name != FORCE:
        return None
    if not eq:
        return True
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise UsageError(f"`{FORCE}` is a switch, not `{FORCE}={value}`",
                     hint=f"Write `{FORCE}` alone (or `{FORCE}=true` / `{FORCE}=false`).")


def as_command(text: str) -> str | None:
    """The command in a plain message to the bot (a direct message, or one mentioning it)
    typed without the slash command, or None when it reads as a reply: `/workflow …`, or a
    subcommand word first (after any leading `--force`). `approve` or `reject` alone is a
    reply to a waiting gate, not a command."""
    prefixed = _SLASH_PREFIX.match(text)
    if prefixed is not None:
        return text[prefixed.end():].strip()
    rest = text.split()
    while rest and rest[0].partition("=")[0] == FORCE:
        rest.pop(0)
    if not rest or rest[0].lower() not in SPECS:
        return None
    if rest[0].lower() in _DECISIONS and all(w.partition("=")[0] == FORCE for w in rest[1:]):
        return None
    return text.strip()


def usage_error(sub: str, message: str) -> UsageError:
    return UsageError(message, usage=f"/workflow {SPECS[sub].usage}")


def closest_command(word: str) -> str | None:
    """The subcommand `word` is a near miss of ("runn" -> "run"), or None; exact names and
    ordinary words are not near misses."""
    word = word.lower()
    if word in SPECS:
        return None
    close = difflib.get_close_matches(word, list(SPECS), n=1, cutoff=0.75)
    return close[0] if close else None


def _did_you_mean(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return f"; did you mean `{close[0]}`?" if close else ""


def _split_options(sub: str, words: list[Word]) -> tuple[list[str], list[tuple[str, str | None]]]:
    """Separate positional words from `--flag value` / `--flag=value` / `--switch`."""
    spec = SPECS[sub]
    positional: list[str] = []
    options: list[tuple[str, str | None]] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word.text == "--" and not word.quoted:  # end of options: the rest is text
            positional.extend(w.text for w in words[i + 1 :])
            break
        if not word.is_flag:
            positional.append(word.text)
            i += 1
            continue
        name, eq, inline = word.text.partition("=")
        if name in spec.switches and not eq:
            options.append((name, None))
            i += 1
        elif name in spec.flags:
            if eq:
                options.append((name, inline))
                i += 1
            elif i + 1 < len(words):
                options.append((name, words[i + 1].text))
                i += 2
            else:
                raise usage_error(sub, f"`{name}` needs a value")
        else:
            valid = [*spec.flags, *spec.switches, FORCE]
            raise usage_error(sub, f"unknown option `{name}` for `{sub}`{_did_you_mean(name, valid)}")
    return positional, options


def _one(options: list[tuple[str, str | None]], name: str, sub: str) -> str | None:
    values = [v for n, v in options if n == name]
    if len(values) > 1:
        raise usage_error(sub, f"`{name}` given {len(values)} times; give it once")
    return values[0] if values else None


def _who(positional: list[str]) -> WhoCommand:
    if not positional or positional[0].lower() != "approved":
        word = positional[0] if positional else ""
        meant = f"who approved {word}" if len(positional) == 1 else "who approved <run>"
        said = f"`who {word}` is not known" if word else "`who` asks who approved a run"
        raise usage_error("who", f"{said}; ask `{meant}`")
    if len(positional) < 2:
        raise usage_error("who", "`who approved` needs <run>")
    _, run = _need(positional, "who", ("approved", "run"))
    return WhoCommand(run)


def _need(positional: list[str], sub: str, names: tuple[str, ...], rest: bool = False) -> list[str]:
    """Exactly the named positionals (plus any trailing words when `rest`)."""
    if len(positional) < len(names):
        missing = names[len(positional)]
        raise usage_error(sub, f"`{sub}` needs <{missing}>")
    if not rest and len(positional) > len(names):
        extra = " ".join(positional[len(names) :])
        raise usage_error(sub, f"unexpected words after `{sub}`: {extra}")
    return positional


def parse_set(raw: str, sub: str = "run") -> SetArg:
    """`a.b=1` -> SetArg(('a','b'), 1); the value is JSON when it parses, else the text."""
    key, eq, value_text = raw.partition("=")
    if not eq or not key:
        raise usage_error(sub, f"`--set {raw}` needs the form key=value")
    path = tuple(key.split("."))
    if len(path) > MAX_NESTING:
        raise usage_error(sub, f"`--set {key[:40]}…` nests {len(path)} levels deep; at most {MAX_NESTING}")
    for part in path:
        if not _KEY.match(part):
            raise usage_error(sub, f"`--set {raw}`: `{part}` is not a valid field name")
    try:
        value: Any = _json(value_text, f"`--set {key}`", MAX_NESTING - len(path), sub)
    except ValueError:
        value = value_text
    return SetArg(path=path, value=value, raw=raw)


def _json(text: str, what: str, depth: int, sub: str) -> Any:
    """`json.loads`, refusing values nested deeper than `depth` (ValueError: not JSON)."""
    try:
        value = json.loads(text)
    except RecursionError:
        value = None
        depth = -1
    if _depth(value) > depth:
        raise usage_error(sub, f"{what} nests deeper than {MAX_NESTING} levels; flatten it")
    problem = value_problem(value)
    if problem is not None:  # e.g. "\u0000" or a lone "\ud800" spelled as a JSON escape
        raise refuse(what, problem)
    return value


def _depth(value: Any) -> int:
    """How many containers deep `value` is (iteratively: a deep value never recurses here)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            level += 1
            deepest = max(deepest, level)
            stack.extend((child, level) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _run(pos: list[str], opts: list[tuple[str, str | None]], force: bool) -> RunCommand:
    _need(pos, "run", ("name",), rest=True)
    sets = tuple(parse_set(v or "") for n, v in opts if n == "--set")
    args_text = _one(opts, "--args", "run")
    args_from = _one(opts, "--args-from", "run")
    if args_text is not None and args_from is not None:
        raise usage_error("run", "give either `--args` or `--args-from`, not both")
    args: dict[str, Any] | None = None
    handle: str | None = None
    if args_text is not None:
        if args_text.startswith(("@", "args:")):
            match = _HANDLE.match(args_text)
            if match is None:
                raise usage_error("run", f"`{args_text}` is not an args handle like @args:3f9a1c2b")
            handle = match.group(1).lower()
        else:
            try:
                parsed = _json(args_text, "`--args`", MAX_NESTING, "run")
            except json.JSONDecodeError as exc:
                raise usage_error("run", f"`--args` is not valid JSON ({exc.msg}) nor an @handle") from exc
            if not isinstance(parsed, dict):
                raise usage_error("run", "`--args` must be a JSON object, like '{\"version\": \"1.4\"}'")
            args = parsed
    message = " ".join(pos[1:]) or None
    return RunCommand(
        workflow=pos[0],
        message=message,
        sets=sets,
        args=args,
        args_handle=handle,
        args_from=args_from,
        resume_from=_one(opts, "--resume-from", "run"),
        force=force,
        replace=_one(opts, "--replace", "run"),
    )


def _rest(pos: list[str], start: int) -> str | None:
    return " ".join(pos[start:]) or None


def _resolve(pos: list[str], opts: list[tuple[str, str | None]], force: bool) -> ResolveCommand:
    run, node, action = _need(pos, "resolve", ("run", "node", "done|retry|fail"))
    action = action.lower()
    if action not in RESOLVE_ACTIONS:
        raise usage_error("resolve", f"`{action}` is not one of done, retry, fail"
                          f"{_did_you_mean(action, RESOLVE_ACTIONS)}")
    output = _one(opts, "--output", "resolve")
    if output is not None and action != "done":
        raise usage_error("resolve", "`--output` goes only with `done`")
    return ResolveCommand(run=run, node=node, action=action, output=output)


def _help(pos: list[str], opts: list[tuple[str, str | None]], force: bool) -> HelpCommand:
    _need(pos, "help", (), rest=True)
    if len(pos) > 1:
        raise usage_error("help", "`help` takes at most one command name")
    topic = pos[0].lower() if pos else None
    if topic is not None and topic not in SPECS:
        raise UsageError(f"unknown command `{topic}`{_did_you_mean(topic, SPECS)}",
                         hint="Type `/workflow help` to see the commands you can use.")
    return HelpCommand(topic)


def _status(pos: list[str], opts: list[tuple[str, str | None]], force: bool) -> StatusCommand:
    if len(pos) > 1:
        raise usage_error("status", "`status` takes at most one run id")
    return StatusCommand(pos[0] if pos else None)


def _queue(pos: list[str], opts: list[tuple[str, str | None]], force: bool) -> QueueCommand:
    if len(pos) > 1:
        raise usage_error("queue", "`queue` takes at most one workflow name or key")
    return QueueCommand(pos[0] if pos else None)


def _open(pos: list[str], opts: list[tuple[str, str | None]], force: bool) -> OpenCommand:
    if len(pos) > 1:
        raise usage_error("open", "`open` takes at most one run id")
    return OpenCommand(pos[0] if pos else None)


def _invalidate(pos: list[str], opts: list[tuple[str, str | None]]) -> InvalidateCommand:
    run, node = _need(pos, "invalidate", ("run", "node"))
    return InvalidateCommand(run, node, downstream=("--downstream", None) in opts)


def _audit(pos: list[str], opts: list[tuple[str, str | None]]) -> AuditCommand:
    since = _one(opts, "--since", "audit")
    fmt = _one(opts, "--format", "audit")
    if since is None:
        if fmt is not None:
            raise usage_error("audit", "`--format` goes only with `--since`")
        return AuditCommand(_need(pos, "audit", ("run",))[0])
    if pos:
        raise usage_error("audit", "`--since` exports every run's audit; give no run id with it")
    if (fmt or "jsonl") not in EXPORT_FORMATS:
        raise usage_error("audit", f"`--format` is one of {', '.join(EXPORT_FORMATS)}, not `{fmt}`")
    return AuditCommand(since=since, format=fmt or "jsonl")


def _runs(opts: list[tuple[str, str | None]]) -> RunsCommand:
    status = _one(opts, "--status", "runs")
    if status is not None and status not in RUN_STATUSES:
        raise usage_error("runs", f"`--status` is one of {', '.join(RUN_STATUSES)}, not `{status}`"
                                  f"{_did_you_mean(status, RUN_STATUSES)}")
    return RunsCommand(open=("--open", None) in opts, workflow=_one(opts, "--workflow", "runs"),
                       status=status)


_OVERLAPS = ("skip", "queue", "cancel_running", "allow")


def _schedule(pos: list[str], opts: list[tuple[str, str | None]]) -> ScheduleCommand:
    if not pos:
        raise usage_error("schedule", f"`schedule` needs one of: {', '.join(SCHEDULE_ACTIONS)}")
    action = pos[0].lower()
    action = "rm" if action in ("remove", "delete") else action
    if action not in SCHEDULE_ACTIONS:
        raise usage_error("schedule", f"`schedule {pos[0]}` is not known"
                                      f"{_did_you_mean(action, SCHEDULE_ACTIONS)}")
    rest = pos[1:]
    if action != "add" and opts:
        raise usage_error("schedule", f"`{opts[0][0]}` goes only with `schedule add`")
    if action == "list":
        _need(rest, "schedule", ())
        return ScheduleCommand("list")
    if action != "add":  # one id; only a pause takes a note (why, for whoever resumes it)
        if not rest:
            raise usage_error("schedule", f"`schedule {action}` needs <id>")
        if len(rest) > 1 and action != "pause":
            raise usage_error("schedule", f"`schedule {action}` takes only <id>, not `{' '.join(rest[1:])}` "
                                          "(a note goes with `schedule pause <id> [note]`)")
        return ScheduleCommand(action, rest[0], note=" ".join(rest[1:]) or None)
    if len(rest) < 2:
        raise usage_error("schedule", 'give the workflow and when: `schedule add <workflow> "<cron>"` or '
                                      "`schedule add <workflow> every <duration>`")
    workflow, when, more = rest[0], rest[1], rest[2:]
    cron = every = None
    if when.lower() == "every":
        if not more:
            raise usage_error("schedule", "`every` needs a duration, e.g. `every 15m`")
        every, more = more[0], more[1:]
    elif len(when.split()) == 5:
        cron = when
    else:
        raise usage_error("schedule", f"`{when}` is neither a quoted cron expression (five fields, e.g. "
                                      '"0 2 * * *") nor `every <duration>`')
    overlap = _one(opts, "--overlap", "schedule")
    if overlap is not None and overlap not in _OVERLAPS:
        raise usage_error("schedule", f"`--overlap` is one of {', '.join(_OVERLAPS)}, not `{overlap}`"
                                      f"{_did_you_mean(overlap, _OVERLAPS)}")
    sets = tuple(parse_set(v or "", "schedule") for n, v in opts if n == "--set")
    return ScheduleCommand("add", workflow, cron=cron, every=every, timezone=_one(opts, "--tz", "schedule"),
                           overlap=overlap, message=" ".join(more) or None, sets=sets)
def _subscription(sub: str, pos: list[str], opts: list[tuple[str, str | None]]) -> Command:
    """`[workflow|*] [class]…`: the first word is the workflow unless it is a class word."""
    from core.workflows.notify_spec import CLASSES

    to = _one(opts, "--to", sub)
    if sub == "subscriptions":
        _need(pos, sub, ())
        return SubscriptionsCommand(to=to)
    workflow = pos[0] if pos and pos[0].lower() not in CLASSES else None
    classes = tuple(w.lower() for w in pos[1 if workflow is not None else 0 :])
    for word in classes:
        if word not in CLASSES:
            close = _did_you_mean(word, CLASSES)
            raise usage_error(sub, f"`{word}` is not one of {', '.join(CLASSES)}{close}")
    if sub == "subscribe":
        return SubscribeCommand(workflow=workflow or "*", classes=classes, to=to)
    return UnsubscribeCommand(workflow=workflow, classes=classes, to=to)


def _bare(pos: list[str], sub: str, command: Command) -> Command:
    _need(pos, sub, ())
    return command


_Builder = Callable[[list[str], list[tuple[str, str | None]], bool], Command]

_BUILDERS: dict[str, _Builder] = {
    "run": _run,
    "resume": lambda p, o, f: ResumeCommand(_need(p, "resume", ("run",))[0]),
    "approve": lambda p, o, f: ApproveCommand(
        _need(p, "approve", ("run",), rest=True)[0], _rest(p, 1), tuple(p[1:])
    ),
    "reject": lambda p, o, f: RejectCommand(_need(p, "reject", ("run",), rest=True)[0], _rest(p, 1)),
    "abandon": lambda p, o, f: AbandonCommand(_need(p, "abandon", ("run",), rest=True)[0], _rest(p, 1)),
    "cancel": lambda p, o, f: CancelCommand(_need(p, "cancel", ("run",))[0]),
    "resolve": _resolve,
    "invalidate": lambda p, o, f: _invalidate(p, o),
    "plan": lambda p, o, f: PlanCommand(_need(p, "plan", ("run",))[0]),
    "status": _status,
    "runs": lambda p, o, f: _bare(p, "runs", _runs(o)),
    "queue": _queue,
    "open": _open,
    "list": lambda p, o, f: _bare(p, "list", ListCommand()),
    "args": lambda p, o, f: ArgsCommand(_need(p, "args", ("run",))[0]),
    "audit": lambda p, o, f: _audit(p, o),
    "who": lambda p, o, f: _who(p),
    "pin": lambda p, o, f: PinCommand(_need(p, "pin", ("run",))[0]),
    "unpin": lambda p, o, f: UnpinCommand(_need(p, "unpin", ("run",))[0]),
    "schedule": lambda p, o, f: _schedule(p, o),
    "subscribe": lambda p, o, f: _subscription("subscribe", p, o),
    "unsubscribe": lambda p, o, f: _subscription("unsubscribe", p, o),
    "subscriptions": lambda p, o, f: _subscription("subscriptions", p, o),
    "help": _help,
}
