"""Factories for node-execution tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from core.engine.nodes import NodeContext
from core.engine.providers import FakeProvider, ProviderRegistry
from tests.environments import step_environment

MakeContext = Callable[..., NodeContext]


@pytest.fixture
def make_ctx(tmp_path: Path) -> MakeContext:
    """A NodeContext in a fresh working directory; keyword arguments override fields
    (`redactor=` builds the step environment around that redactor)."""

    def make(**overrides: Any) -> NodeContext:
        workdir = tmp_path / "work"
        artifacts = tmp_path / "artifacts"
        workdir.mkdir(exist_ok=True)
        artifacts.mkdir(exist_ok=True)
        fields: dict[str, Any] = {
            "run_id": "run-1",
            "node_id": "step",
            "workdir": workdir,
            "artifacts_dir": artifacts,
            "idempotency_key": None,
            "timeout": 10.0,
        }
        redactor = overrides.pop("redactor", None)
        fields["environment"] = step_environment(redactor=redactor)
        fields.update(overrides)
        return NodeContext(**fields)

    return make


@pytest.fixture
def fake_providers() -> ProviderRegistry:
    return ProviderRegistry({"fake": FakeProvider()}, "fake")
