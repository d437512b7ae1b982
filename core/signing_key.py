"""The run pages' signing key: never in the database, never where a step's query could find it.

    key = signing_key(settings)      # bytes; read (or made) once, at start

- `BATON_WEB_SECRET` set: the key is derived from it (HMAC-SHA256 under a fixed label), so
  every replica given the same secret signs and checks with the same key, and the secret
  itself is never the key.
- unset: a random key kept in `<BATON_DATA_DIR>/web-signing.key`, mode 0600, created once and
  atomically (written to a private temporary file, then hard-linked into place: two processes
  starting together end up with the same key), read without following a symlink. Replicas on
  several machines need `BATON_WEB_SECRET` (or one shared data directory).

Earlier versions kept the key in the `platform_state` table, where any process that could
read the database (a step running `sqlite3`) could sign links as anyone; migration
`0010_signing_key_row` deletes that row, and the key it held is never used again.

The caller adds the key to the runtime's redactor (`bot/app.py`), like every secret.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
from pathlib import Path

from core.config import Settings
from core.errors import ConfigurationError

log = logging.getLogger("baton.web")

KEY_FILE = "web-signing.key"
_LABEL = b"baton.run-pages.signing-key.v1"
_KEY = re.compile(rb"[0-9a-f]{64}")


def signing_key(settings: Settings) -> bytes:
    """The key that signs page links (hex text, so it can be redacted like any secret)."""
    if settings.web_secret is not None and settings.web_secret.get_secret_value():
        secret = settings.web_secret.get_secret_value().encode("utf-8")
        return hmac.new(secret, _LABEL, hashlib.sha256).hexdigest().encode("ascii")
    return key_file(settings.data_dir / KEY_FILE)


def existing_key(settings: Settings) -> bytes | None:
    """The key when there is one already (never made here): what a process that serves no
    page (a worker, `baton say` with the pages off) still hides from what it shows."""
    if settings.web_secret is not None and settings.web_secret.get_secret_value():
        return signing_key(settings)
    try:
        return _read(settings.data_dir / KEY_FILE)
    except (FileNotFoundError, ConfigurationError):
        return None


def key_file(path: Path) -> bytes:
    """The key kept in `path`, made first when there is none."""
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, secrets.token_hex(32).encode("ascii") + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(temporary, path)  # never replaces a key another process made first
    except FileExistsError:
        pass
    finally:
        os.unlink(temporary)
    return _read(path)


def _read(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise _unusable(path, exc.strerror or str(exc)) from exc
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid():
            raise _unusable(path, "it belongs to another user")
        if info.st_mode & 0o077:
            os.fchmod(fd, 0o600)
            log.warning("the page signing key %s was readable by others; made it 0600", path,
                        extra={"action": "signing_key"})
        data = os.read(fd, 4096).strip()
    finally:
        os.close(fd)
    if not _KEY.fullmatch(data):
        raise _unusable(path, "it does not hold a key")
    return data


def _unusable(path: Path, why: str) -> ConfigurationError:
    return ConfigurationError(
        f"the run pages' signing key {path} cannot be used: {why}",
        hint=f"Delete {path} (Baton makes a new one; links already sent stop working), "
        "or set BATON_WEB_SECRET.",
    )
