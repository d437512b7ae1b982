"""The tool registry, the decorator and loading tool modules."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from core.engine.tools import ToolRegistry, default_registry, tool
from core.errors import ConfigurationError
from core.store.records import ReplayClass


def test_decorator_records_name_replay_class_and_key_parameter() -> None:
    registry = ToolRegistry()

    @registry.tool("post", replay="idempotent")
    def post_release(title: str, idempotency_key: str | None = None) -> str:
        return title

    spec = registry.get("post")
    assert spec.fn is post_release
    assert spec.replay is ReplayClass.IDEMPOTENT
    assert spec.accepts_key
    assert not spec.inline
    assert not spec.is_async


def test_bare_decorator_uses_the_function_name_and_unsafe_default() -> None:
    registry = ToolRegistry()

    @registry.tool
    async def notify(text: str) -> None:
        return None

    spec = registry.get("notify")
    assert spec.replay is ReplayClass.UNSAFE
    assert spec.is_async
    assert not spec.accepts_key
    assert registry.names() == ["notify"]


def test_module_level_decorator_registers_in_the_default_registry() -> None:
    @tool("unit_test_default_registry_probe", replay="pure", inline=True)
    def probe() -> str:
        return "ok"

    assert default_registry.get("unit_test_default_registry_probe").inline


def test_unknown_tool_lists_the_known_ones() -> None:
    registry = ToolRegistry()
    registry.tool("alpha")(lambda: None)
    registry.tool("beta")(lambda: None)
    with pytest.raises(ConfigurationError) as caught:
        registry.get("gamma")
    assert "`gamma`" in caught.value.message
    assert "known tools: `alpha`, `beta`" in caught.value.message
    assert "BATON_TOOL_MODULES" in caught.value.hint


def test_two_different_functions_with_one_name_are_refused() -> None:
    registry = ToolRegistry()

    @registry.tool("send")
    def first() -> None: ...

    with pytest.raises(ConfigurationError, match="defined twice"):

        @registry.tool("send")
        def second() -> None: ...


def test_bad_replay_class_and_inline_async_are_refused() -> None:
    registry = ToolRegistry()
    with pytest.raises(ConfigurationError, match="declares replay `sometimes`"):
        registry.tool("x", replay="sometimes")(lambda: None)

    async def slow() -> None: ...

    with pytest.raises(ConfigurationError, match="async and marked inline"):
        registry.tool("y", inline=True)(slow)


def test_load_registers_tools_of_a_py_file_relative_to_base(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "release.py").write_text(
        textwrap.dedent(
            """
            from core.engine.tools import tool

            @tool("unit_load_file_publish", replay="idempotent")
            def publish(title, idempotency_key=None):
                return {"title": title, "key": idempotency_key}

            def helper():
                return "not a tool"
            """
        )
    )
    registry = ToolRegistry()
    assert registry.load(["tools/release.py"], base=tmp_path) == ["unit_load_file_publish"]
    assert registry.get("unit_load_file_publish").replay is ReplayClass.IDEMPOTENT
    # loading again is harmless (the module is not executed twice)
    assert registry.load(["tools/release.py"], base=tmp_path) == ["unit_load_file_publish"]
    assert len(registry) == 1


def test_load_imports_a_module_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "unit_tool_pkg").mkdir()
    (tmp_path / "unit_tool_pkg" / "__init__.py").write_text("")
    (tmp_path / "unit_tool_pkg" / "ops.py").write_text(
        "from core.engine.tools import tool\n\n@tool('unit_load_module_ping', replay='pure')\n"
        "def ping():\n    return 'pong'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = ToolRegistry()
    assert registry.load(["unit_tool_pkg.ops"], base=tmp_path) == ["unit_load_module_ping"]


def test_a_missing_tool_file_is_a_configuration_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as caught:
        ToolRegistry().load(["workflows/tools.py"], base=tmp_path)
    assert str(tmp_path / "workflows" / "tools.py") in caught.value.message
    assert "does not exist" in caught.value.message
    assert "BATON_TOOL_MODULES" in caught.value.hint


def test_a_missing_module_name_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="tool module `no_such_baton_tools` was not found"):
        ToolRegistry().load(["no_such_baton_tools"], base=Path("."))


def test_a_module_that_fails_to_import_names_the_error(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import no_such_dependency_for_baton\n")
    with pytest.raises(ConfigurationError) as caught:
        ToolRegistry().load(["broken.py"], base=tmp_path)
    assert "failed to import: ModuleNotFoundError" in caught.value.message
    assert "no_such_dependency_for_baton" in caught.value.message


def test_a_tool_file_python_cannot_import_names_the_setting(tmp_path: Path) -> None:
    (tmp_path / "hello.yaml").write_text("name: hello\n")
    with pytest.raises(ConfigurationError) as caught:
        ToolRegistry().load([str(tmp_path / "hello.yaml")], base=tmp_path)
    assert f"tool module file {tmp_path / 'hello.yaml'} cannot be imported" in caught.value.message
    assert "BATON_TOOL_MODULES" in caught.value.hint
