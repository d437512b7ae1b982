"""`baton console`: an interactive chat with Baton in the terminal.

Type `/workflow run hello hi`, just `run hello hi`, or plain text (an approval like
"lgtm"). Buttons appear as numbered choices; typing the number runs that button's
command. The progress message is redrawn in place on a terminal that allows it, else
printed whenever it changes. Ctrl-D (or SIGTERM) leaves.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO

from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.history import FileHistory
from prompt_toolkit.utils import is_dumb_terminal
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from adapters.console.forms import fill
from adapters.console.messages import PLATFORM, to_chat_message
from adapters.console.oneshot import Baton, drive_to_rest
from adapters.console.output import choices_of, choices_text, reply_text, terminal_safe
from core.commands.hints import hint
from core.commands.messages import Button, ChatMessage, Reply
from core.commands.notices import is_notice
from core.commands.voting import button_ballot
from core.engine.ballots import Ballot
from core.errors import BatonError
from core.redaction import Redactor
from core.render import redacted

LineReader = Callable[[], Awaitable[str | None]]  # None: end of input


class ConsoleView:
    """Shows replies; remembers the numbered choices; edits the progress message in place."""

    def __init__(self, stream: IO[str], *, redraw: bool, redactor: Redactor, exports: Path) -> None:
        self._redactor = redactor
        self._exports = exports  # where files replies carry are written (`exports_dir`)
        # soft wrap: the terminal folds long lines for the eye, but the text keeps them whole, so
        # a link or a command copied from it (or read from a pipe) is never cut by a newline
        self._console = Console(file=stream, highlight=False, markup=False, emoji=False, soft_wrap=True)
        self._redraw = redraw
        self.choices: tuple[Button, ...] = ()
        self._last_key: str | None = None  # replace_key of the block printed last
        self._last_text = ""
        self._last_height = 0
        self._shown: set[str] = set()  # replace_keys shown: an `edit_only` reply edits only those
        self._choices_key: str | None = None  # replace_key of the reply the numbers come from

    def mark_input(self) -> None:
        """The user's line is on screen now: never redraw across it."""
        self._last_key = None

    def note(self, text: str) -> None:
        """A line of the console's own (a form's prompt), never redrawn over."""
        self._console.print(Text(terminal_safe(self._redactor.redact(text)), style="cyan"))
        self._last_key = None

    def banner(self) -> None:
        self._console.print(
            Text(
                "Baton console. Type `help`, a command such as `run hello hi`, or a reply; Ctrl-D quits.",
                style="bold",
            )
        )

    def choice(self, text: str) -> Button | None:
        """The button a typed number stands for, if any."""
        if text.isdigit() and 1 <= int(text) <= len(self.choices):
            return self.choices[int(text) - 1]
        return None

    def _height(self, text: str) -> int:
        width = max(1, self._console.width)
        return sum(max(1, -(-cell_len(line) // width)) for line in text.split("\n"))

    def show(self, reply: Reply) -> None:
        if reply.how.edit_only and reply.how.replace_key not in self._shown and not reply.data.get("settled"):
            return  # edits a message this console never showed (a gate's end is still told:
            # its message may be on the screen from before a restart)
        if reply.how.replace_key is not None:
            self._shown.add(reply.how.replace_key)
        text = terminal_safe(reply_text(reply, self._redactor, self._exports))
        reply = redacted(reply, self._redactor)
        same_block = reply.how.replace_key is not None and reply.how.replace_key == self._last_key
        choices = choices_of(reply)
        if same_block and text == self._last_text and (not choices or choices == self.choices):
            return  # unchanged progress: nothing to print
        if same_block and self._redraw:
            # cursor up over the previous version of this message, erase to end of screen
            self._console.file.write(f"\x1b[{self._last_height}F\x1b[J")
        style = "bold red" if reply.is_error else ("dim" if reply.kind == "progress" else "")
        block = Text(text, style=style)
        if choices:
            self.choices, self._choices_key = choices, reply.how.replace_key
            block.append("\n" + terminal_safe(choices_text(reply)), style="cyan")
        elif reply.how.edit_only and reply.how.replace_key == self._choices_key:
            self.choices = ()  # the gate those numbers decided is decided
        self._console.print(block)
        self._last_key = reply.how.replace_key
        self._last_text = text
        self._last_height = self._height(block.plain)


def _stdin_reader() -> LineReader:
    """Lines from a non-terminal stdin, read in a daemon thread (never blocks shutdown)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    if isinstance(sys.stdin, io.TextIOWrapper):  # bytes that are not UTF-8 reach the handler,
        sys.stdin.reconfigure(errors="surrogateescape")  # which refuses them with one line

    def pump() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(queue.put_nowait, line.rstrip("\n"))
        loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=pump, name="console-stdin", daemon=True).start()
    return queue.get


def _prompt_reader(history: Path, user: str) -> LineReader:
    history.parent.mkdir(parents=True, exist_ok=True)
    session: PromptSession[str] = PromptSession(history=FileHistory(str(history)))

    async def read() -> str | None:
        try:
            return await session.prompt_async(f"{user}> ")
        except EOFError:
            return None
        except KeyboardInterrupt:
            return ""  # Ctrl-C clears the line, as in a shell

    return read


async def _until_stopped(baton: Baton, reader: LineReader) -> str | None:
    """The next line, or None when input ends or the process is asked to stop."""
    line = asyncio.ensure_future(reader())
    stop = asyncio.ensure_future(baton.stopping.wait())
    await asyncio.wait({line, stop}, return_when=asyncio.FIRST_COMPLETED)
    stop.cancel()
    if not line.done():
        line.cancel()
        return None
    return line.result()


async def _form_answered(
    baton: Baton, replies: list[Reply], message: ChatMessage, reader: LineReader, view: ConsoleView
) -> tuple[ChatMessage | None, Ballot | None]:
    """A reply that asks for a form (a run's inputs, a gate's values): its fields as numbered
    prompts, then the command they complete as the next message (a gate's: the ballot, for
    `Handler.decide`); None when none asks."""
    form = next((r.form for r in replies if r.form is not None and not r.how.edit_only), None)
    if form is None:
        return None, None

    async def say(text: str) -> None:
        view.note(text)

    result = await fill(form, baton.handler.asking, message, reader, say)
    if result is None or result.command is None:
        return None, None
    answered = dataclasses.replace(message, text=result.command, event_id=f"{message.event_id}-form")
    return answered, result.ballot


async def interactive(
    baton: Baton, *, conversation: str, user: str, history: Path, exports: Path, thread: str | None = None
) -> None:
    """Chat until Ctrl-D / end of input / a stop signal; files replies carry go to `exports`."""
    tty = sys.stdin.isatty() and sys.stdout.isatty() and not is_dumb_terminal()
    view = ConsoleView(sys.stdout, redraw=tty, redactor=baton.redactor, exports=exports)
    reader = _prompt_reader(history, user) if tty else _stdin_reader()

    async def show(reply: Reply) -> None:
        if tty:  # hides the prompt while printing, then redraws it
            await run_in_terminal(lambda: view.show(reply))
        else:
            view.show(reply)

    async def outbox(reply: Reply) -> None:
        # this conversation's replies, what is sent to this person directly (a reminder's copy), and
        # notices to any console conversation (marked with theirs)
        to = reply.to
        mine = to.conversation in (None, conversation) or (to.direct and to.conversation == user)
        if mine or is_notice(reply):
            await show(reply)

    baton.handler.register_outbox(PLATFORM, outbox)
    view.banner()
    while (line := await _until_stopped(baton, reader)) is not None:
        view.mark_input()
        line = line.strip()
        if not line:
            continue
        button = view.choice(line)
        ballot: Ballot | None = None
        if button is not None:
            line = f"/workflow {button.command}"
            ballot = button_ballot(button.command)  # a gate's Approve / Reject: a ballot
        message: ChatMessage | None = to_chat_message(line, conversation, user, thread)
        while message is not None:
            try:
                if ballot is not None:  # a gate's form, filled in: its values never read as a command
                    replies = await baton.handler.decide(ballot, message)
                else:
                    replies = await baton.handler.handle(message)
            except BatonError as exc:  # the handler answers errors itself; this is the safety net
                data = {"message": exc.message, "hint": hint(exc)}
                replies = [Reply(kind="error", data=data, is_error=True)]
            for reply in replies:
                await show(reply)
            message, ballot = await _form_answered(baton, replies, message, reader, view)
    if not tty and not baton.stopping.is_set():
        await drive_to_rest(baton, set())  # piped input: finish what it started before leaving
