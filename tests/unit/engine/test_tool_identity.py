"""A tool's identity: its declared version or the normalized source of its module and the
modules that module imports from its own directory; reloading a registry whose files changed."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from core.engine.tool_identity import changed
from core.engine.tools import ToolRegistry
from core.errors import ConfigurationError

# a registry of its own: `@tool` would register into the process-wide default registry,
# where the same tool name from another test's directory is a conflict
PRODUCE = '''\
from core.engine.tools import ToolRegistry

tool = ToolRegistry().tool


@tool(replay="pure")
def produce(x: str) -> str:
    """Prefix the value."""
    return "old-" + x
'''


def _load(path: Path) -> ToolRegistry:
    registry = ToolRegistry()
    registry.load([str(path)], path.parent)
    return registry


def _identity(path: Path, name: str = "produce") -> str:
    """The identity of `name` in `path`, as a freshly started Baton would compute it."""
    for module_name, module in list(sys.modules.items()):
        if getattr(module, "__file__", None) == str(path.resolve()):
            del sys.modules[module_name]
    identity = _load(path).identity(name)
    assert identity is not None
    return identity


def _age(path: Path, seconds: float = 60) -> None:
    """Backdate the file, as an edit made a while ago (not racy)."""
    stamp = path.stat().st_mtime - seconds
    os.utime(path, (stamp, stamp))


@pytest.fixture
def tools_py(tmp_path: Path) -> Path:
    path = tmp_path / "tools" / "tools.py"
    path.parent.mkdir()
    path.write_text(PRODUCE)
    return path


def test_reformatting_and_comments_keep_the_identity_code_and_docstrings_change_it(tools_py: Path) -> None:
    base = _identity(tools_py)
    assert base.startswith("source:")

    tools_py.write_text(
        PRODUCE.replace('    return "old-" + x', "    # prefix it\n    return (\n        'old-'  +  x\n    )")
        + "\n\n# trailing comment\n"
    )
    assert _identity(tools_py) == base

    tools_py.write_text(PRODUCE.replace('"old-"', '"new-"'))
    assert _identity(tools_py) != base

    tools_py.write_text(PRODUCE.replace("Prefix the value.", "Prefix the value, politely."))
    assert _identity(tools_py) != base  # a program can read its docstring


def test_a_declared_version_replaces_the_source(tools_py: Path) -> None:
    tools_py.write_text(PRODUCE.replace('@tool(replay="pure")', '@tool(replay="pure", version="1")'))
    assert _identity(tools_py) == "version:1"
    tools_py.write_text(
        PRODUCE.replace('@tool(replay="pure")', '@tool(replay="pure", version="1")').replace("old-", "new-")
    )
    assert _identity(tools_py) == "version:1"  # the author decided: same version, same results


@pytest.mark.parametrize("version", ["", "  ", True])
def test_an_empty_version_is_refused(version: Any) -> None:
    registry = ToolRegistry()
    with pytest.raises(ConfigurationError, match="declares version"):
        registry.tool("t", version=version)(lambda: "x")


HELPER_IMPORTS = [
    "import helpers\n",
    "from helpers import shout\n",
    "from lib import helpers\n",
]


@pytest.mark.parametrize("statement", HELPER_IMPORTS)
def test_a_module_imported_from_the_same_directory_is_part_of_the_identity(
    tools_py: Path, statement: str
) -> None:
    folder = tools_py.parent
    helper = folder / ("lib/helpers.py" if "lib" in statement else "helpers.py")
    (folder / "lib").mkdir()
    (folder / "lib" / "__init__.py").write_text("")
    helper.write_text("def shout(x):\n    return x.upper()\n")
    # written inside the function: imported when first called, still part of the identity
    tools_py.write_text(PRODUCE.replace('    return "old-" + x', f"    {statement}    return 'old-' + x"))
    base = _identity(tools_py)

    helper.write_text("def shout(x):\n    # louder\n    return x.upper()\n")
    assert _identity(tools_py) == base
    helper.write_text("def shout(x):\n    return x.upper() + '!'\n")
    assert _identity(tools_py) != base


def test_modules_outside_the_tool_directory_do_not_count(tmp_path: Path, tools_py: Path) -> None:
    outside = tmp_path / "helpers.py"  # the tool directory's parent
    outside.write_text("X = 1\n")
    tools_py.write_text(PRODUCE.replace('    return "old-"', '    import json, helpers\n    return "old-"'))
    base = _identity(tools_py)
    outside.write_text("X = 2\n")
    assert _identity(tools_py) == base


def test_relative_imports_inside_a_package_are_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "pkg_t19_rel"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("SUFFIX = '!'\n")
    (package / "tools.py").write_text(
        "from .helpers import SUFFIX\n" + PRODUCE.replace('"old-" + x', '"old-" + x + SUFFIX')
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = ToolRegistry()
    registry.load(["pkg_t19_rel.tools"], tmp_path)
    assert registry.changed_files() == []
    assert registry.get("produce").fn("a") == "old-a!"
    covered = {Path(p).name for p, *_ in registry.get("produce").stamps}
    assert covered == {"helpers.py", "tools.py"}

    (package / "tools.py").write_text("from . import SUFFIX\n" + PRODUCE)  # defined by the package
    (package / "__init__.py").write_text("SUFFIX = '?'\n")
    fresh = registry.refreshed()
    assert {Path(p).name for p, *_ in fresh.get("produce").stamps} == {"__init__.py", "tools.py"}
    for name in [n for n in sys.modules if n.startswith("pkg_t19_rel")]:
        del sys.modules[name]


def test_digests_are_cached_by_path_mtime_and_size_unless_the_file_is_racy(tools_py: Path) -> None:
    _age(tools_py)
    base = _identity(tools_py)
    stat = tools_py.stat()
    # the same size and, forced back, the same mtime: a cached digest is not recomputed
    tools_py.write_text(PRODUCE.replace('"old-"', '"new-"'))
    os.utime(tools_py, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert _identity(tools_py) == base

    # a file modified just now is read again each time, even with an unchanged stamp
    tools_py.write_text(PRODUCE.replace('"old-"', '"mid-"'))
    fresh = tools_py.stat()
    first = _identity(tools_py)
    tools_py.write_text(PRODUCE.replace('"old-"', '"end-"'))
    os.utime(tools_py, ns=(fresh.st_atime_ns, fresh.st_mtime_ns))
    assert _identity(tools_py) != first


def test_a_function_without_a_source_file_is_keyed_by_its_code() -> None:
    registry = ToolRegistry()
    namespace: dict[str, object] = {}
    exec("def made():\n    return 1\n", namespace)  # a tool built at run time
    registry.tool("made")(namespace["made"])
    identity = registry.identity("made")
    assert identity is not None and identity.startswith("code:")
    assert registry.identity("unknown") is None


async def test_a_changed_module_is_imported_again_and_runs_the_new_code(tools_py: Path) -> None:
    registry = _load(tools_py)
    assert registry.refreshed() is registry  # nothing changed: the same registry
    assert registry.get("produce").fn("a") == "old-a"

    tools_py.write_text(PRODUCE.replace('"old-"', '"new-"') + "\n")  # another size: a new stamp
    assert changed(registry.get("produce").stamps) == [str(tools_py.resolve())]
    fresh = registry.refreshed()
    assert fresh is not registry
    assert fresh.get("produce").fn("a") == "new-a"
    assert fresh.identity("produce") != registry.identity("produce")
    assert fresh.refreshed() is fresh
    assert registry.get("produce").fn("a") == "old-a"  # executions that hold it keep their code


def test_a_changed_helper_is_imported_again_with_its_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "pkg_t19_helper"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("def word():\n    return 'old'\n")
    (package / "tools.py").write_text(
        "from core.engine.tools import ToolRegistry\nfrom pkg_t19_helper import helpers\n\n"
        "tool = ToolRegistry().tool\n\n\n"
        "@tool(replay='pure')\ndef produce() -> str:\n    return helpers.word()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = ToolRegistry()
    registry.load(["pkg_t19_helper.tools"], tmp_path)
    assert registry.get("produce").fn() == "old"

    (package / "helpers.py").write_text("def word():\n    return 'brand-new'\n")
    fresh = registry.refreshed()
    assert fresh.get("produce").fn() == "brand-new"
    assert fresh.identity("produce") != registry.identity("produce")
    for name in [n for n in sys.modules if n.startswith("pkg_t19_helper")]:
        del sys.modules[name]


def test_a_module_that_no_longer_imports_is_a_configuration_error(tools_py: Path) -> None:
    registry = _load(tools_py)
    tools_py.write_text(PRODUCE + "\ndef broken(:\n")
    with pytest.raises(ConfigurationError, match="failed to import") as caught:
        registry.refreshed()
    assert "SyntaxError" in caught.value.message
    assert "BATON_TOOL_MODULES" in (caught.value.hint or "")


def test_tools_added_by_hand_survive_a_reload(tools_py: Path) -> None:
    registry = _load(tools_py)

    @registry.tool("by_hand", replay="pure")
    def by_hand() -> str:
        return "kept"

    tools_py.write_text(textwrap.dedent(PRODUCE) + "\n\n")
    fresh = registry.refreshed()
    assert fresh is not registry
    assert fresh.get("by_hand").fn() == "kept"
    assert sorted(fresh.names()) == ["by_hand", "produce"]


def test_modules_imported_before_the_tools_are_never_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool directory holding Baton's own code (tools.py at the project root) must not
    make a reload import Baton's modules twice."""
    (tmp_path / "t19_early.py").write_text("VALUE = 1\n")
    (tmp_path / "t19_tools.py").write_text("import t19_early\n" + PRODUCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import t19_early  # type: ignore[import-not-found]  # imported before the tools, as Baton's own are

    registry = ToolRegistry()
    registry.load(["t19_tools"], tmp_path)
    (tmp_path / "t19_tools.py").write_text("import t19_early\n" + PRODUCE.replace("old-", "new-") + "\n")
    fresh = registry.refreshed()
    assert fresh.get("produce").fn("a") == "new-a"
    assert sys.modules["t19_early"] is t19_early
    for name in ("t19_early", "t19_tools"):
        sys.modules.pop(name, None)


def test_a_quick_second_edit_of_the_same_size_is_noticed(tools_py: Path) -> None:
    """File systems stamp with a coarse clock: an edit within one tick may keep mtime and size."""
    registry = _load(tools_py)
    stat = tools_py.stat()
    tools_py.write_text(PRODUCE.replace('"old-"', '"new-"'))  # the same size
    os.utime(tools_py, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and, forced, the same mtime
    assert changed(registry.get("produce").stamps) == [str(tools_py.resolve())]
    assert registry.refreshed().get("produce").fn("a") == "new-a"
