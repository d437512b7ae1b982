"""The one place that assembles Baton's runtime from its settings.

    runtime = assemble(settings)      # redactor, step environment, catalog, providers, tools
    build_baton(settings)             # bot/app.py: + store, engine, handler (`run`, `say`, `console`)
    serve_worker(settings)            # bot/worker.py: + store, job queue (`worker`)

Every entry point goes through `assemble`, so every process hides the same secrets the same
way: one `Redactor` holds the settings' secrets (tokens, keys, the passwords of the database
and OpenAI URLs), every value of the operator's secrets file and every secret a loaded
workflow declares (and any declared later, as steps receive them). That instance is the one
the log handler, the renderers of every platform, the audit trail and the steps' stderr
tails use; nothing has a "no secrets" default to fall back on.

Steps never inherit the process environment (`core/engine/step_env.py`). Beyond that, the
variables holding the settings' secrets are removed from this process's environment once
read (a subprocess a tool starts inherits none of them), and the process makes itself
non-dumpable where the OS allows it, so a step running as the same user cannot read the
environment Baton started with through `/proc/<pid>/environ` (or attach a debugger) either.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.logging import redact_logs_with
from core.config import Settings
from core.engine.providers import ProviderRegistry
from core.engine.step_env import StepEnvironment
from core.engine.tools import ToolRegistry
from core.redaction import Redactor
from core.workflows.catalog import Catalog

log = logging.getLogger("baton.runtime")

DEFAULT_TOOL_MODULE = "workflows/tools.py"
_PR_SET_DUMPABLE = 4


@dataclass(frozen=True)
class Runtime:
    """What every Baton process runs on, before its store and its role-specific parts."""

    settings: Settings
    redactor: Redactor
    environment: StepEnvironment
    catalog: Catalog
    providers: ProviderRegistry
    tools: ToolRegistry


def assemble(settings: Settings, *, environ: Mapping[str, str] | None = None) -> Runtime:
    """Build the runtime; `environ` is the operator's environment (this process's by default),
    the source of the variables steps inherit and of the declared secrets' values."""
    forbid_inspection()
    environ = dict(os.environ) if environ is None else environ
    redactor = Redactor(settings.secrets())
    scrub_environ(redactor)
    environment = StepEnvironment.from_environ(
        environ, redactor=redactor, secrets_file=settings.secrets_file
    )
    catalog = Catalog(settings.workflow_dirs)
    for entry in catalog.entries():
        if entry.workflow is not None:
            environment.hide_declared(entry.workflow.declared_secrets())
    redact_logs_with(redactor)
    return Runtime(
        settings=settings,
        redactor=redactor,
        environment=environment,
        catalog=catalog,
        providers=ProviderRegistry.from_settings(settings),
        tools=load_tools(settings.tool_modules),
    )


def settings_redactor(settings: Settings) -> Redactor:
    """What the log handler hides before the runtime is assembled (the settings' secrets)."""
    return Redactor(settings.secrets())


def scrub_environ(redactor: Redactor) -> list[str]:
    """Remove from `os.environ` every variable whose value holds one of `redactor`'s secrets
    (settings are read already); the names removed."""
    gone = [name for name, value in os.environ.items() if redactor.redact(value) != value]
    for name in gone:
        del os.environ[name]
    return gone


def forbid_inspection() -> None:
    """Linux: mark this process non-dumpable, so that other processes of the same user (the
    steps it starts) cannot read its memory or `/proc/<pid>/environ`. Elsewhere: nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")
    except (OSError, AttributeError) as exc:
        log.warning("could not make the process non-dumpable: %s", exc, extra={"action": "harden"})


def load_tools(modules: Sequence[str], base: Path | None = None) -> ToolRegistry:
    """Register the `@tool` functions of `modules` (module names or `.py` paths relative to
    `base`, the current directory by default). The default `workflows/tools.py` may be
    absent; any other missing module is a configuration error (raised by the registry)."""
    base = base if base is not None else Path.cwd()
    wanted = [m for m in modules if not (m == DEFAULT_TOOL_MODULE and not (base / m).is_file())]
    registry = ToolRegistry()
    found = registry.load(wanted, base)
    log.debug("tools loaded: %s", ", ".join(found) or "none", extra={"action": "tools_loaded"})
    return registry
