"""Tool modules learnt in the step sandbox (`bot/runtime.py` `describe_tools`, real bubblewrap),
never imported by Baton: the same tools, keyed the same way, as an import in Baton's process
would register (replicas and workers agree on cache keys whichever way they loaded them);
an edit is picked up, a broken module is the same one-line error."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.runtime import TOOLS_CACHE, describe_tools, load_tools
from core.config import Settings
from core.engine.tools import ToolRegistry
from core.errors import ConfigurationError

pytestmark = pytest.mark.bwrap

HELPERS = "PREFIX = 'hi '\n"
TOOLS = """\
import os

from core.engine.tools import ToolRegistry
from helpers import PREFIX

tool = ToolRegistry().tool
IMPORTED_AS = os.getuid()


@tool(replay="pure", version="2")
def versioned(x: str) -> str:
    return PREFIX + x


@tool("keyed", replay="idempotent")
async def post(title: str, idempotency_key: str | None = None) -> dict:
    return {"title": title}


@tool(replay="pure", inline=True)
def quick() -> str:
    return PREFIX
"""


@pytest.fixture
def module(tmp_path: Path) -> Path:
    tmp_path.chmod(0o755)
    folder = tmp_path / "workflows"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    (folder / "helpers.py").write_text(HELPERS)
    (folder / "tools.py").write_text(TOOLS)
    for f in folder.iterdir():
        f.chmod(0o644)
    sys.path.insert(0, str(folder))  # `from helpers import …`, for the import in this process
    yield folder / "tools.py"
    sys.path.remove(str(folder))
    sys.modules.pop("helpers", None)


def _sandbox(tmp_path: Path):  # type: ignore[no-untyped-def]
    from bot.runtime import step_sandbox

    return step_sandbox(Settings(_env_file=None, data_dir=tmp_path / "data", step_sandbox="bwrap"))  # type: ignore[call-arg]


def _facts(registry: ToolRegistry) -> dict[str, tuple[object, ...]]:
    return {
        n: (s.replay, s.accepts_key, s.inline, s.is_async, s.identity, s.stamps, s.source, s.file, s.origin)
        for n in registry.names()
        for s in [registry.get(n)]
    }


def test_described_tools_are_the_tools_an_import_registers(tmp_path: Path, module: Path) -> None:
    imported = ToolRegistry()
    imported.load([str(module)], Path("/"))
    described = ToolRegistry(describe=lambda specs, base: describe_tools(_sandbox(tmp_path), specs, base))
    described.load([str(module)], Path("/"))
    assert described.names() == ["keyed", "quick", "versioned"]
    assert _facts(described) == _facts(imported)
    assert described.get("versioned").identity == "version:2"
    assert described.get("quick").identity.startswith("source:")  # the module and helpers.py
    assert {Path(s[0]).name for s in described.get("quick").stamps} == {"tools.py", "helpers.py"}
    with pytest.raises(ConfigurationError, match="runs in the step sandbox only"):
        described.get("quick").fn()


def test_an_edited_module_is_described_again(tmp_path: Path, module: Path) -> None:
    sandbox = _sandbox(tmp_path)
    registry = load_tools([str(module)], [module.parent], sandbox)
    before = registry.get("quick").identity
    assert registry.refreshed() is registry  # nothing changed
    time.sleep(0.01)
    module.write_text(TOOLS.replace("return PREFIX\n", "return PREFIX * 2\n") + (
        "\n\n@tool(replay='pure')\ndef added() -> str:\n    return 'new'\n"))
    module.chmod(0o644)
    os.utime(module, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    fresh = registry.refreshed()
    assert fresh is not registry and "added" in fresh.names()
    assert fresh.get("quick").identity != before
    assert fresh.get("versioned").identity == "version:2"


def test_a_module_that_fails_to_import_in_the_sandbox_is_a_configuration_error(
    tmp_path: Path, module: Path
) -> None:
    module.write_text("import os\nraise RuntimeError('no network here: ' + str(os.getuid()))\n")
    module.chmod(0o644)
    with pytest.raises(ConfigurationError) as broken:
        load_tools([str(module)], [module.parent], _sandbox(tmp_path))
    said = broken.value.message
    assert "failed to import: RuntimeError: no network here" in said and str(module) in said
    uid = 65534 if os.geteuid() == 0 else os.getuid()
    assert said.endswith(str(uid))  # it ran as the step user, in the sandbox


def test_a_description_is_kept_for_the_next_start_until_a_file_it_depends_on_moves(
    tmp_path: Path, module: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox, data = _sandbox(tmp_path), tmp_path / "data"
    first = load_tools([str(module)], [module.parent], sandbox, data_dir=data)
    kept = data / TOOLS_CACHE
    assert kept.stat().st_mode & 0o777 == 0o600
    described: list[object] = []
    real = subprocess.run

    def counting(argv: object, *args: object, **kwargs: object) -> object:
        described.append(argv)
        return real(argv, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(subprocess, "run", counting)
    again = load_tools([str(module)], [module.parent], sandbox, data_dir=data)
    assert described == [] and _facts(again) == _facts(first)  # the next start: no sandboxed process
    (module.parent / "helpers.py").write_text("PREFIX = 'hello '\n")  # a same-directory import
    (module.parent / "helpers.py").chmod(0o644)
    edited = load_tools([str(module)], [module.parent], sandbox, data_dir=data)
    assert len(described) == 1 and edited.get("quick").identity != first.get("quick").identity
    module.write_text("X = 1\n")  # no tool left: the module's own stamp tells
    module.chmod(0o644)
    assert load_tools([str(module)], [module.parent], sandbox, data_dir=data).names() == []
    assert len(described) == 2
    kept.write_text("{not json")
    assert load_tools([str(module)], [module.parent], sandbox, data_dir=data).names() == []
    assert len(described) == 3  # a kept file that does not read is described again
