"""Factories for workflow tests: write YAML into a temporary directory and load it."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from core.errors import WorkflowDefinitionError
from core.workflows.loader import load_workflow_file
from core.workflows.model import Workflow

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "workflows"


@pytest.fixture
def write_workflow(tmp_path: Path) -> Callable[..., Path]:
    """Write dedented YAML to `<tmp>/<name>` and return the path."""

    def write(text: str, name: str = "wf.yaml") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return write


@pytest.fixture
def load_yaml(write_workflow: Callable[..., Path]) -> Callable[[str], Workflow]:
    def load(text: str) -> Workflow:
        return load_workflow_file(write_workflow(text))

    return load


@pytest.fixture
def load_error(write_workflow: Callable[..., Path]) -> Callable[[str], WorkflowDefinitionError]:
    """Load YAML that must fail; return the error."""

    def load(text: str) -> WorkflowDefinitionError:
        path = write_workflow(text)
        with pytest.raises(WorkflowDefinitionError) as info:
            load_workflow_file(path)
        assert info.value.file == str(path)
        return info.value

    return load
