"""What a step's process finds in its environment, and where declared secrets come from.

A step (bash, script, the `command` prompt provider) never inherits Baton's environment.
It sees, and only sees:

    PATH HOME LANG LC_* TZ TMPDIR USER     the operator's values of these (`INHERITED`)
    env:                                   the workflow's, then the node's literal values
    secrets: [NAME, …]                     each declared secret's value (`SecretSource`)
    BATON_RUN_ID … BATON_WORKFLOW_DIR      the step variables, added last (`process.py`)

Never Baton's own settings: chat tokens, API keys, the database URL (a workflow cannot even
name a `BATON_*` variable; the loader refuses it). A step secret is one the operator provided
for steps, and nothing else: a `NAME=value` line of the secrets file (`BATON_SECRETS_FILE`,
re-read when it changes), or a name listed in `BATON_STEP_SECRETS`, whose value comes from
Baton's environment (else the file). Any other variable of Baton's environment (`PGPASSWORD`,
cloud credentials) is never handed to a step, whatever a workflow declares; the catalog refuses
such a workflow at load (`provided`). Every value handed to a step, and every value the operator
provided, is added to the runtime's one `Redactor`, so it is hidden wherever people look.

Missing secrets: `require` refuses to start (or resume, or approve into) a run of a workflow
whose declared secrets are not all available; if one disappears while the run goes on, the
step that needs it fails with one line (`variables`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from core.engine.sandbox import NO_SANDBOX, Sandbox
from core.errors import ConfigurationError, MissingSecret
from core.redaction import Redactor

log = logging.getLogger("baton.sandbox")

#: the operator's variables a step inherits (and every `LC_*`)
INHERITED: frozenset[str] = frozenset({"PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER"})
_LOCALE_PREFIX = "LC_"
SECRETS_FILE_SETTING = "BATON_SECRETS_FILE"  # named in errors and logs


def inherited_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """The allowlisted part of the operator's environment."""
    return {k: v for k, v in environ.items() if k in INHERITED or k.startswith(_LOCALE_PREFIX)}


class SecretSource:
    """Values of the step secrets the operator provides: a name listed in `step_secrets`
    (`BATON_STEP_SECRETS`) from the operator's environment, then the file; any other name from
    the file only. Nothing else of the environment is ever read.

    The environment is a snapshot taken at start (settings are read once) of the listed names
    only; the file is re-read whenever its size, mtime or inode changes, so a rotated value is
    used by the next step without a restart.
    """

    def __init__(
        self, environ: Mapping[str, str], file: Path | None = None, *, step_secrets: Iterable[str] = ()
    ) -> None:
        self.listed: frozenset[str] = frozenset(step_secrets)
        self._environ = {k: v for k, v in environ.items() if k in self.listed}
        self._file = file
        self._stamp: tuple[int, int, int] | None = None
        self._values: dict[str, str] = {}
        self._lock = threading.Lock()
        if file is not None:
            if not file.is_file():
                raise ConfigurationError(
                    f"{SECRETS_FILE_SETTING}: {file} is not a readable file",
                    hint=f"Point {SECRETS_FILE_SETTING} at a file of NAME=value lines, or unset it.",
                )
            self._refresh()
            if file.stat().st_mode & 0o077:
                log.warning(
                    "the secrets file %s can be read by other users; chmod 600 it",
                    file,
                    extra={"action": "secrets_file"},
                )

    def get(self, name: str) -> str | None:
        """The value of step secret `name`, or None when the operator provides none."""
        value = self._environ.get(name)  # only names BATON_STEP_SECRETS lists are kept
        if value is not None:
            return value
        return self._refresh().get(name)

    def provided(self) -> frozenset[str]:
        """The names a workflow may declare: those listed in `BATON_STEP_SECRETS` and those of
        the secrets file (as it reads now)."""
        return self.listed | frozenset(self._refresh())

    def listed_values(self) -> list[str]:
        """The values in the environment of the names `BATON_STEP_SECRETS` lists."""
        return list(self._environ.values())

    def file_values(self) -> list[str]:
        """Every value of the secrets file: all of them are secrets, declared or not."""
        return list(self._refresh().values())

    def _refresh(self) -> dict[str, str]:
        if self._file is None:
            return self._values
        try:
            info = self._file.stat()
        except OSError:
            return self._values  # gone for now: keep what it said
        stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        if stamp == self._stamp:
            return self._values
        from dotenv import dotenv_values

        with self._lock:
            try:
                read = dotenv_values(self._file, interpolate=False)
            except (OSError, UnicodeDecodeError) as exc:
                log.warning("cannot read the secrets file %s: %s", self._file, exc,
                            extra={"action": "secrets_file"})
                return self._values
            self._values = {k: v for k, v in read.items() if v is not None}
            self._stamp = stamp
        return self._values


@dataclass(frozen=True)
class StepEnvironment:
    """Builds each step's environment; hides every secret it hands out with `redactor`;
    `sandbox` is what a step's process runs in (`core/engine/sandbox.py`)."""

    inherited: Mapping[str, str]
    secrets: SecretSource
    redactor: Redactor
    sandbox: Sandbox = NO_SANDBOX

    @classmethod
    def from_environ(
        cls,
        environ: Mapping[str, str],
        *,
        redactor: Redactor,
        secrets_file: Path | None = None,
        sandbox: Sandbox = NO_SANDBOX,
        step_secrets: Iterable[str] = (),
    ) -> StepEnvironment:
        """From the operator's environment (read once, at the entry point); `step_secrets`:
        the names `BATON_STEP_SECRETS` lists."""
        source = SecretSource(environ, secrets_file, step_secrets=step_secrets)
        redactor.add(source.file_values())
        redactor.add(source.listed_values())
        return cls(inherited_variables(environ), source, redactor, sandbox)

    def provided(self) -> frozenset[str]:
        """The secret names a workflow may declare (`SecretSource.provided`)."""
        return self.secrets.provided()

    def hide_declared(self, names: Iterable[str]) -> None:
        """Add the values of these declared secrets (those available) to the redactor."""
        self.redactor.add(v for v in (self.secrets.get(n) for n in names) if v is not None)

    def require(self, workflow: str, names: Iterable[str]) -> None:
        """Raise `MissingSecret` naming every declared secret that is not available."""
        wanted = tuple(names)
        missing = [n for n in wanted if self.secrets.get(n) is None]
        if missing:
            raise MissingSecret(missing, workflow=workflow)
        self.hide_declared(wanted)

    def variables(
        self, env: Mapping[str, str], secrets: Iterable[str], *, node_id: str
    ) -> dict[str, str]:
        """The inherited variables, the node's `env:` values and its secrets' values.
        `MissingSecret` when a declared secret is not available (any more)."""
        values = {**self.inherited, **env}
        found: dict[str, str] = {}
        missing: list[str] = []
        for name in secrets:
            value = self.secrets.get(name)
            if value is None:
                missing.append(name)
            else:
                found[name] = value
        if missing:
            raise MissingSecret(missing, node=node_id)
        self.redactor.add(found.values())
        values.update(found)
        return values
