"""Tools: Python callables a workflow step can call (`tool: post_release`).

    from core.engine.tools import tool

    @tool(replay="idempotent")
    def post_release(title: str, idempotency_key: str | None = None) -> dict: ...

    @tool("ping", replay="pure", inline=True)      # cheap and sync: called on the event loop
    def ping() -> str: return "pong"

    @tool(replay="pure", version="2")              # its callers' results change when "2" does
    def parse(text: str) -> dict: ...

`@tool` registers into the module-level `default_registry`; tests build their own
`ToolRegistry()` and use `registry.tool(...)`. `ToolRegistry.load(specs, base)` imports the
modules named by `BATON_TOOL_MODULES` (module names or .py paths relative to `base`) and
registers every `@tool` function they define.

A tool receives the step's `with:` values as keywords, plus `idempotency_key=` when its
signature names that parameter. Sync tools run in a worker thread (they cannot block the
loop) unless marked `inline=True`; async tools are awaited.

A tool's `identity` is part of the cache key of every step that calls it
(`core/engine/tool_identity.py`): its declared `version=`, else the source of its module and
of the modules that module imports from its own directory. `refreshed()` re-imports the
loaded modules when one of those files changed on disk, so an edited tool takes effect in a
running Baton, and its identity always describes the code that runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from core.engine.tool_identity import Stamp, changed, identity_of, source_facts
from core.errors import ConfigurationError
from core.replay_class import ReplayClass

if TYPE_CHECKING:
    from core.workflows.model import Workflow

F = TypeVar("F", bound=Callable[..., Any])

KEY_PARAMETER = "idempotency_key"
#: False in the sandboxed tool runner (`core/engine/tool_runner.py`): it calls tools, it never
#: keys them, so it skips reading and hashing their source
_identities = True
_SPEC_ATTRIBUTE = "__baton_tool__"


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    fn: Callable[..., Any]
    replay: ReplayClass
    accepts_key: bool  # the function takes `idempotency_key=`
    inline: bool = False  # sync and cheap: call it on the event loop, not in a thread
    is_async: bool = False
    #: part of its callers' cache keys: `version:<v>`, `source:<digest>` or `code:<digest>`
    identity: str = ""
    #: (path, mtime_ns, size, digest) of the files its source identity covers, as they were read
    stamps: tuple[Stamp, ...] = ()
    #: the module it was loaded from (`load`): a module name or an absolute .py path; a
    #: sandboxed step imports it from there (None: registered in code, called in process)
    source: str | None = None
    #: the file of that module (None: not known, or registered in code)
    file: str | None = None

    @property
    def origin(self) -> str:
        return f"{getattr(self.fn, '__module__', '?')}.{getattr(self.fn, '__qualname__', '?')}"


def make_spec(
    fn: Callable[..., Any],
    name: str | None,
    replay: ReplayClass | str,
    inline: bool,
    version: str | int | None = None,
) -> ToolSpec:
    """Validate a decorated function and describe it, with its identity as of now."""
    tool_name = name or fn.__name__
    if version is not None and (isinstance(version, bool) or not str(version).strip()):
        raise ConfigurationError(
            f"tool `{tool_name}` declares version {version!r}",
            hint="Give version= a non-empty string such as '2', or leave it out to key by source.",
        )
    try:
        replay_class = ReplayClass(replay)
    except ValueError:
        raise ConfigurationError(
            f"tool `{tool_name}` declares replay `{replay}`",
            hint="Use replay='pure', 'idempotent' or 'unsafe'.",
        ) from None
    is_async = inspect.iscoroutinefunction(fn)
    if inline and is_async:
        raise ConfigurationError(
            f"tool `{tool_name}` is async and marked inline=True",
            hint="inline=True is for cheap sync tools; async tools are awaited anyway, drop the flag.",
        )
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    facts = source_facts(fn) if _identities else None
    declared = None if version is None else str(version).strip()
    return ToolSpec(
        name=tool_name,
        fn=fn,
        replay=replay_class,
        accepts_key=KEY_PARAMETER in params,
        inline=inline,
        is_async=is_async,
        identity=identity_of(fn, declared, facts) if _identities else "",
        stamps=facts.stamps if facts is not None else (),
    )


class ToolRegistry:
    """Tools by name."""

    def __init__(self, specs: Iterable[ToolSpec] = (), *, describe: Describe | None = None) -> None:
        #: how `load` learns a module's tools without importing it here (`bot/runtime.py`: in
        #: the step sandbox); None: it imports the module in this process
        self._describe = describe
        self._tools: dict[str, ToolSpec] = {}
        self._loads: list[tuple[tuple[str, ...], Path]] = []  # what `load` imported, to re-import
        self._loaded: set[str] = set()  # names registered by `load` (the others are kept as they are)
        self._baseline: frozenset[str] | None = None  # `sys.modules` before the first `load`
        for spec in specs:
            self.add(spec)

    def add(self, spec: ToolSpec) -> None:
        known = self._tools.get(spec.name)
        if known is not None and known.fn is not spec.fn and known.origin != spec.origin:
            raise ConfigurationError(
                f"tool `{spec.name}` is defined twice: {known.origin} and {spec.origin}",
                hint="Rename one of them with @tool('other_name').",
            )
        self._tools[spec.name] = spec

    def tool(
        self,
        name: str | Callable[..., Any] | None = None,
        *,
        replay: ReplayClass | str = "unsafe",
        inline: bool = False,
        version: str | int | None = None,
    ) -> Any:
        """Decorator registering into this registry (`@registry.tool` or `@registry.tool("n", ...)`)."""

        def decorate(fn: F) -> F:
            spec = make_spec(fn, name if isinstance(name, str) else None, replay, inline, version)
            setattr(fn, _SPEC_ATTRIBUTE, spec)
            self.add(spec)
            return fn

        return decorate(name) if callable(name) else decorate

    def get(self, name: str) -> ToolSpec:
        try:
            return self._tools[name]
        except KeyError:
            known = ", ".join(f"`{n}`" for n in sorted(self._tools)) or "none"
            raise ConfigurationError(
                f"no tool is registered as `{name}` (known tools: {known})",
                hint="Define it with @tool in a module of BATON_TOOL_MODULES, or fix the step's `tool:`.",
            ) from None

    def names(self) -> list[str]:
        return sorted(self._tools)

    def identity(self, name: str) -> str | None:
        """The identity of the tool registered as `name` (None: no such tool)."""
        spec = self._tools.get(name)
        return spec.identity if spec is not None else None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def load(self, specs: Sequence[str], base: Path) -> list[str]:
        """Import each module (a dotted name or a .py path relative to `base`) and register its
        `@tool` functions here. Returns the names of the tools found, in order."""
        found: list[str] = []
        if self._describe is not None:
            for told in (from_description(d) for d in self._describe(specs, base)):
                self.add(told)
                found.append(told.name)
            self._loads.append((tuple(specs), base))
            self._loaded.update(found)
            return found
        if self._baseline is None:
            self._baseline = frozenset(sys.modules)
        for spec in specs:
            module = _import(spec, base)
            source = str((base / spec).resolve()) if is_path(spec) else spec
            file = getattr(module, "__file__", None)
            for value in list(vars(module).values()):
                tool_spec = getattr(value, _SPEC_ATTRIBUTE, None)
                if isinstance(tool_spec, ToolSpec):
                    self.add(dataclasses.replace(tool_spec, source=source, file=file))
                    found.append(tool_spec.name)
        self._loads.append((tuple(specs), base))
        self._loaded.update(found)
        return found

    def changed_files(self) -> list[str]:
        """Files behind the loaded tools that changed on disk since they were imported."""
        stamps = {stamp for name in self._loaded for stamp in self._tools[name].stamps}
        return changed(sorted(stamps))

    def refreshed(self) -> ToolRegistry:
        """This registry, or, when a file behind a loaded tool changed, a new one with every
        loaded module imported again (tools added by hand are carried over as they are).

        Every module first imported since the first `load` whose file lies in a tool's
        directory is dropped from `sys.modules` first (never one imported before, such as
        Baton's own), so the new registry runs, and is keyed by, the code on disk now;
        executions already running keep the registry they started with. Raises
        `ConfigurationError` when a module no longer imports.
        """
        if not self._loads or not self.changed_files():
            return self
        if self._describe is not None:  # nothing of theirs was imported here: describe them again
            kept = (spec for name, spec in self._tools.items() if name not in self._loaded)
            fresh = ToolRegistry(kept, describe=self._describe)
            for specs, base in self._loads:
                fresh.load(specs, base)
            return fresh
        folders = {Path(stamp[0]).parent for name in self._loaded for stamp in self._tools[name].stamps}
        baseline = self._baseline or frozenset()
        for module_name, module in list(sys.modules.items()):
            filename = getattr(module, "__file__", None)
            if module_name in baseline or not filename:
                continue
            if any(Path(filename).resolve().is_relative_to(folder) for folder in folders):
                del sys.modules[module_name]
                _forget_bytecode(module)
        fresh = ToolRegistry(spec for name, spec in self._tools.items() if name not in self._loaded)
        fresh._baseline = baseline
        for specs, base in self._loads:
            fresh.load(specs, base)
        return fresh


#: `ToolRegistry`'s way to learn modules' tools without importing them here: (modules, base)
#: -> each tool's `described` JSON; raises `ConfigurationError` as `load` would
Describe = Callable[[Sequence[str], Path], list[dict[str, Any]]]


def described(spec: ToolSpec) -> dict[str, Any]:
    """`spec` as JSON, for a process that did not import its module (`from_description`)."""
    fn = inspect.unwrap(spec.fn)
    return {
        "name": spec.name, "replay": spec.replay.value, "accepts_key": spec.accepts_key,
        "inline": spec.inline, "is_async": spec.is_async, "identity": spec.identity,
        "stamps": [list(stamp) for stamp in spec.stamps], "source": spec.source, "file": spec.file,
        "module": getattr(fn, "__module__", "?"), "qualname": getattr(fn, "__qualname__", "?"),
    }


def from_description(found: dict[str, Any]) -> ToolSpec:
    """The `ToolSpec` a description stands for: its function runs only where its module is
    imported (the sandboxed tool runner); called here, it says so."""
    name = str(found["name"])

    def elsewhere(*args: Any, **kwargs: Any) -> Any:
        raise ConfigurationError(
            f"tool `{name}` runs in the step sandbox only (its module was never imported by Baton)",
            hint="Turn the step sandbox on (BATON_STEP_SANDBOX), or load tool modules where it is off.",
        )

    elsewhere.__module__, elsewhere.__qualname__ = str(found["module"]), str(found["qualname"])
    return ToolSpec(
        name=name, fn=elsewhere, replay=ReplayClass(found["replay"]), accepts_key=bool(found["accepts_key"]),
        inline=bool(found["inline"]), is_async=bool(found["is_async"]), identity=str(found["identity"]),
        stamps=tuple((str(p), int(m), int(z), str(d)) for p, m, z, d in found["stamps"]),
        source=found["source"], file=found["file"],
    )


def unregistered(workflow: Workflow, registry: ToolRegistry) -> ConfigurationError | None:
    """The error for a workflow whose `tool:` steps name a tool nobody registered (None: all
    are known), so it is refused before anything runs rather than failing at that step."""
    missing = [(node.id, node.tool) for node in workflow.nodes if node.tool and node.tool not in registry]
    if not missing:
        return None
    steps = ", ".join(f"`{node}` calls `{name}`" for node, name in missing)
    known = ", ".join(f"`{n}`" for n in registry.names()) or "none"
    return ConfigurationError(
        f"workflow `{workflow.name}` uses tools no tool module registers: {steps} (known tools: {known})",
        hint="Define them with @tool in a module of BATON_TOOL_MODULES (default: tools.py next to the "
        "workflows), or fix the steps' `tool:`.",
    )


def _forget_bytecode(module: ModuleType) -> None:
    """Remove the module's cached bytecode, so that importing it again compiles its source: a
    .pyc is checked against its source's mtime and size only, and an edit within the file
    system's clock tick may keep both (a quick second edit of the same size ran the old code
    wherever Python writes bytecode)."""
    cached = getattr(module, "__cached__", None)
    if cached:
        with contextlib.suppress(OSError):
            os.remove(cached)


def is_path(spec: str) -> bool:
    return spec.endswith(".py") or "/" in spec or "\\" in spec


def _import(spec: str, base: Path) -> ModuleType:
    if is_path(spec):
        return _import_file(spec, base)
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as exc:
        if exc.name is not None and spec.startswith(exc.name):
            raise ConfigurationError(
                f"tool module `{spec}` was not found",
                hint="Fix BATON_TOOL_MODULES: a module name on the Python path or a .py file path.",
            ) from exc
        raise _broken(spec, exc) from exc
    except Exception as exc:
        raise _broken(spec, exc) from exc


def _import_file(spec: str, base: Path) -> ModuleType:
    path = Path(spec)
    if not path.is_absolute():
        path = base / path
    path = path.resolve()
    if not path.is_file():
        raise ConfigurationError(
            f"tool module file {path} does not exist",
            hint=f"Fix BATON_TOOL_MODULES (module names or .py paths relative to {base}).",
        )
    name = f"_baton_tools_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise ConfigurationError(
            f"tool module file {path} cannot be imported",
            hint="Fix BATON_TOOL_MODULES: list Python modules or .py files only.",
        )
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise _broken(str(path), exc) from exc
    return module


def _broken(spec: str, exc: BaseException) -> ConfigurationError:
    return ConfigurationError(
        f"tool module {spec} failed to import: {type(exc).__name__}: {exc}",
        hint="Fix the error in that module, or remove it from BATON_TOOL_MODULES.",
    )


#: Where `@tool` registers; the engine uses it unless given another registry.
default_registry = ToolRegistry()


def tool(
    name: str | Callable[..., Any] | None = None,
    *,
    replay: ReplayClass | str = "unsafe",
    inline: bool = False,
    version: str | int | None = None,
) -> Any:
    """Register a sync or async callable as a tool in `default_registry`.

    `replay` is its replay class (pure | idempotent | unsafe, default unsafe); `inline=True`
    marks a cheap sync tool that is called directly on the event loop instead of in a thread.
    `version` replaces its source as its identity in its callers' cache keys: results are
    re-used until the version changes, whatever the code does (the author answers for it).
    Usable bare (`@tool`) or with arguments (`@tool("name", replay="pure")`).
    """
    return default_registry.tool(name, replay=replay, inline=inline, version=version)
