"""The chat commands as typed options, for a platform whose command box fills in fields rather
than taking text (Discord's application commands), and `spell`, which writes the chat command
a set of values stands for, quoted as `parser.parse` reads it. Parsing, usage errors and
authorization stay the handler's, identical on every platform. Pure.

    spell(TYPED["approve"], {"run": "3f9a", "comment": "looks good"})  # 'approve 3f9a "looks good"'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from core.commands.model import RESOLVE_ACTIONS, SCHEDULE_ACTIONS, SPECS
from core.commands.quoting import quote_word, split_words
from core.errors import UsageError

#: How a value enters the command: `word` quoted as one word, `text` as typed, `switch` its
#: `--name` when true, `flag` `--name <word>` when given, `each` `--name <word>` for each word.
Spelling = Literal["word", "text", "switch", "flag", "each"]


@dataclass(frozen=True, slots=True)
class Option:
    name: str
    describe: str
    spelling: Spelling = "word"
    required: bool = False
    choices: tuple[str, ...] = ()  # one of these (else free text, or a boolean for a `switch`)
    suggest: Literal["workflows", "runs"] | None = None  # what to offer while it is typed


@dataclass(frozen=True, slots=True)
class Typed:
    """One command as options; `order`: the options' names in the order they are spelled,
    when it is not the order they are asked in."""

    name: str
    describe: str
    options: tuple[Option, ...] = ()
    order: tuple[str, ...] = ()


def _run(required: bool = True, describe: str = "the run: its id, or a prefix of it") -> Option:
    return Option("run", describe, required=required, suggest="runs")


_LATEST = "default: the latest run here"
_WHY = Option("reason", "why")


def _typed(name: str, *options: Option, order: tuple[str, ...] = ()) -> Typed:
    return Typed(name, SPECS[name].brief, options, order)


#: Every command a platform offers as options, in the order it shows them.
TYPED: dict[str, Typed] = {t.name: t for t in (
    Typed("do", "Any chat command as you would type it: run hello hi · help", (Option(
        "command", "e.g. run hello hi · resume <run> · approve <run> lgtm · status · help",
        "text", required=True),)),
    _typed("run", Option("name", "the workflow", required=True, suggest="workflows"),
           Option("message", "the text its steps get as inputs.message"),
           Option("set", "inputs as key=value, several separated by spaces", "each"),
           Option("force", "start fresh even when an unfinished run of it is here", "switch"),
           order=("name", "force", "set", "message")),
    _typed("resume", _run()),
    _typed("approve", _run(), Option("comment", "said with the approval")),
    _typed("reject", _run(), _WHY),
    _typed("abandon", _run(), _WHY),
    _typed("cancel", _run()),
    _typed("status", _run(False, _LATEST)),
    _typed("plan", _run()),
    _typed("resolve", _run(), Option("node", "the step", required=True),
           Option("action", "what became of it", "text", required=True, choices=RESOLVE_ACTIONS),
           Option("output", "its output (done)", "flag")),
    _typed("invalidate", _run(), Option("node", "the step", required=True),
           Option("downstream", "its dependents too", "switch")),
    _typed("args", _run()),
    _typed("audit", _run(False),
           Option("since", "admins: every run's audit over e.g. 30m, 12h, 7d, as a file", "flag"),
           Option("format", "the file's format (with since)", "flag", choices=("jsonl", "csv"))),
    _typed("open", _run(False, _LATEST)),
    _typed("runs", Option("open", "your link to their page instead", "switch")),
    _typed("queue", Option("target", "a workflow's name or a concurrency key (default: every key)",
                           suggest="workflows")),
    _typed("list"),
    _typed("schedule", Option("action", "add, list, show, pause, resume, run (fire now) or rm", "text",
                              required=True, choices=SCHEDULE_ACTIONS),
           Option("rest", 'add: <workflow> "<cron>" | every <duration> [--tz Z] [message] …; '
                          "others: the schedule's id [note]", "text")),
    _typed("help", Option("command", "one command's usage", "text", choices=tuple(SPECS))),
)}


def spell(typed: Typed, values: Mapping[str, Any]) -> str:
    """The chat command `values` (option name -> value; absent: not given) stand for."""
    options = {o.name: o for o in typed.options}
    words = [] if typed.name == "do" else [typed.name]
    for name in typed.order or tuple(options):
        words += _spelled(options[name], values.get(name))
    return " ".join(w for w in words if w)


def _spelled(option: Option, value: Any) -> list[str]:
    flag = f"--{option.name}"
    if option.spelling == "switch":
        return [flag] if value else []
    if option.spelling == "text":
        return [value] if value else []
    if option.spelling == "flag":
        return [] if value is None else [f"{flag} {quote_word(value)}"]
    if option.spelling == "each":
        try:
            return [f"{flag} {quote_word(w.text)}" for w in split_words(value or "")]
        except UsageError:  # an unbalanced quote: the handler says so, as for typed text
            return [f"{flag} {value}"]
    return [quote_word(value)] if option.required or value else []
