"""Factories for node-execution tests with real subprocesses.

Every test that looks at its step only through the step's result (no `tmp_path` of its own:
no fifo, marker file or host pid watched from outside) runs twice: as the step runs without
the sandbox (`BATON_STEP_SANDBOX=none`) and in the real bubblewrap sandbox. The tests that
watch a step from outside run without it; their sandboxed counterparts (processes that do
not outlive their step, however detached) are tests/e2e/console/test_sandbox.py and
tests/unit/engine/test_sandbox.py."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest

from bot.runtime import step_sandbox
from core.config import Settings
from core.engine.nodes import NodeContext
from tests.unit.engine.nodes.conftest import MakeContext, fake_providers

__all__ = ["MakeContext", "fake_providers", "make_ctx"]

_SANDBOXED = pytest.param("sandboxed", marks=pytest.mark.bwrap)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    own = inspect.signature(metafunc.function).parameters
    if "make_ctx" in own and "tmp_path" not in own and "step_mode" not in own:  # (it chose its own)
        metafunc.parametrize("step_mode", ["plain", _SANDBOXED])


@pytest.fixture
def step_mode() -> str:
    return "plain"


@pytest.fixture
def make_ctx(tmp_path: Path, step_mode: str) -> MakeContext:
    """A NodeContext in a fresh working directory (`tests/unit/engine/nodes/conftest.py`), in
    the sandbox when `step_mode` says so."""
    from tests.unit.engine.nodes.conftest import make_ctx as plain

    make: MakeContext = plain.__wrapped__(tmp_path)  # type: ignore[attr-defined]
    if step_mode == "plain":
        return make
    tmp_path.chmod(0o755)
    sandbox = step_sandbox(Settings(_env_file=None, data_dir=tmp_path / "data", step_sandbox="bwrap"))  # type: ignore[call-arg]

    def sandboxed(**overrides: Any) -> NodeContext:
        ctx = make(**overrides)
        return dataclasses.replace(ctx, environment=dataclasses.replace(ctx.environment, sandbox=sandbox))

    return sandboxed
