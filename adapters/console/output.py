"""`Reply` -> console text or JSON: the console's `send` side.

Buttons become numbered choices (`[1] Resume …`) under the rendered text, and so do the
options of a choice list (under its placeholder); typing the number runs that command (see
`interactive.py`). Everything printed goes through the runtime's redactor (`core.render`):
text, labels and commands.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from adapters.console.formatting import FORMAT
from core.commands.messages import Attachment, Button, Reply
from core.commands.replies import FORM_ACTION
from core.errors import ConfigurationError
from core.redaction import Redactor
from core.render import redacted, render

#: what a terminal would act on rather than show, as something it shows: the C0 controls but
#: tab and newline as their control pictures (ESC as ␛), DEL as ␡, the C1 controls (0x9b is a
#: CSI of its own on some terminals) and the bidirectional overrides as escapes.
_CONTROLS = str.maketrans({
    **{chr(c): chr(0x2400 + c) for c in range(0x20) if c not in (0x09, 0x0A)},
    "\x7f": "\u2421",
    **{chr(c): f"\\x{c:02x}" for c in range(0x80, 0xA0)},
    **{chr(c): f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))},
})


def terminal_safe(text: str) -> str:
    """`text` as a terminal shows it, never as commands to it: a step's output (code under
    review, a model's answer) that holds `ESC [2J`, an OSC 52 clipboard write or a cursor move
    over an earlier line cannot clear the screen, fill the clipboard or forge a line such as
    "✅ Approved". A carriage return is a new line (what a progress bar meant)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").translate(_CONTROLS)


def reply_text(reply: Reply, redactor: Redactor, exports: Path) -> str:
    """The reply rendered for the console (all chunks joined); a file it carries is written
    into `exports` (`saved_file`) and its path shown."""
    text = "\n".join(render(reply, FORMAT, redactor)).rstrip("\n")
    if reply.file is not None:
        text = f"{text}\nSaved to {saved_file(reply.file, exports)}"
    return text


def exports_dir(data_dir: Path) -> Path:
    """Where the console keeps the files replies carry: a directory of Baton's data directory,
    never a shared one such as `$TMPDIR` where another user could plant a symlink."""
    return data_dir / "exports"


def saved_file(file: Attachment, folder: Path) -> Path:
    """`folder/<name>`, written (again, with the same bytes) each time a reply carrying it is
    shown. `folder` is made private (0700) and must be a directory of this user, not a
    symlink; the file is created anew (O_CREAT|O_EXCL|O_NOFOLLOW, 0600) under a temporary
    name and renamed into place, so a symlink planted under its name is replaced, never
    followed."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write exports into {folder}: it is not a plain directory ({exc.strerror or exc})",
            hint=f"Remove {folder}; Baton makes it again (BATON_DATA_DIR decides where).",
        ) from exc
    try:
        info = os.fstat(dir_fd)
        if info.st_uid != os.geteuid():
            raise ConfigurationError(f"cannot write exports into {folder}: it belongs to another user",
                                     hint=f"Remove {folder}, or set BATON_DATA_DIR to a directory of yours.")
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(dir_fd, 0o700)
        name = Path(file.name).name
        temporary = f".{name}.{secrets.token_hex(6)}"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as out:
            out.write(file.content or b"")
        os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    return folder / name


def buttons_of(reply: Reply) -> tuple[Button, ...]:
    """The reply's buttons the console shows: not those opening a form (it has none; the
    reply's text says what to type instead)."""
    return tuple(b for b in reply.buttons if b.action != FORM_ACTION)


def choices_of(reply: Reply) -> tuple[Button, ...]:
    """What the numbers stand for: the buttons, then each choice list's options."""
    return (*buttons_of(reply), *(option for menu in reply.menus for option in menu.options))


def choices_text(reply: Reply, first: int = 1) -> str:
    """`[1] Resume  /workflow resume r_1` lines, numbered from `first`; a choice list's
    options under its placeholder."""
    lines: list[str] = []
    n = first
    for heading, buttons in [("", buttons_of(reply)), *((m.placeholder, m.options) for m in reply.menus)]:
        if heading:
            lines.append(heading)
        for button in buttons:
            lines.append(f"[{n}] {button.label}  /workflow {button.command}")
            n += 1
    return "\n".join(lines)


def reply_to_json(reply: Reply, redactor: Redactor, exports: Path) -> dict[str, Any]:
    """The JSON object `baton say --json` prints for one reply."""
    text = reply_text(reply, redactor, exports)
    reply = redacted(reply, redactor)
    return {
        "kind": reply.kind,
        "text": text,
        "run_id": reply.run_id,
        "run_status": reply.run_status,
        "buttons": [_button_json(b) for b in buttons_of(reply)],
        "menus": [
            {"placeholder": m.placeholder, "options": [_button_json(b) for b in m.options]}
            for m in reply.menus
        ],
        "is_error": reply.is_error,
        "thread": reply.to.thread,
        "replace_key": reply.how.replace_key,
        "ephemeral": reply.how.ephemeral,
        "file": None if reply.file is None else str(saved_file(reply.file, exports)),
    }


def _button_json(b: Button) -> dict[str, Any]:
    return {"label": b.label, "command": b.command, "action": b.action, "style": b.style}


def replies_json(replies: Iterable[Reply], redactor: Redactor, exports: Path) -> str:
    return json.dumps([reply_to_json(r, redactor, exports) for r in replies], ensure_ascii=False, indent=2)


def send(reply: Reply, redactor: Redactor, exports: Path, stream: IO[str] | None = None) -> None:
    """Print one reply (and its numbered choices) for a person reading the terminal."""
    out = stream if stream is not None else sys.stdout
    text = reply_text(reply, redactor, exports)
    reply = redacted(reply, redactor)
    if choices_of(reply):
        text = f"{text}\n{choices_text(reply)}" if text else choices_text(reply)
    out.write(terminal_safe(text) + "\n")
    out.flush()
