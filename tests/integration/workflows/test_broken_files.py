"""A broken workflow file, as a user meets it through the real `baton` command: `baton list`
names the file, the line and the fix, and every other workflow still runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
HELLO = "name: hello\nnodes:\n  - id: greet\n    bash: echo hello {{ inputs.message }}\n    replay: pure\n"
BROKEN = {
    "syntax.yaml": (
        "name: syntax\nnodes:\n  - id: a\n    bash: echo: needs quotes\n",
        ":4: YAML syntax error",
        "Fix the YAML at that line",
    ),
    "unknown.yaml": (
        "name: unknown\nnodes:\n  - id: a\n    bash: echo a\n"
        "  - id: b\n    dependson: [a]\n    bash: echo b\n",
        ":6: unknown key `dependson` in node `b`",
        "Did you mean `depends_on`?",
    ),
    "cycle.yaml": (
        "name: cycle\nnodes:\n  - id: a\n    depends_on: [b]\n    bash: echo a\n"
        "  - id: b\n    depends_on: [a]\n    bash: echo b\n",
        ":4: `depends_on` forms a cycle: a -> b -> a",
        "Remove one of these dependencies",
    ),
    "schema.yaml": (
        "name: schema\nnodes:\n  - id: draft\n    prompt: hi\n"
        "    output: {format: json, schema: {type: object, required: title}}\n",
        ":5: invalid JSON Schema in `output.schema` of `draft`",
        "Fix the schema",
    ),
    "deep.yaml": (  # once a RecursionError that stopped `baton` at startup
        "[" * 5000 + "]" * 5000 + "\n",
        ":1: the file is nested too deeply",
        "Flatten the YAML",
    ),
}


def _baton(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_")}
    env.update(
        BATON_DATABASE_URL=f"sqlite:///{home / 'baton.db'}",
        BATON_WORKFLOW_DIRS=str(home / "workflows"),
        BATON_DATA_DIR=str(home / ".baton"),
        BATON_TOOL_MODULES="[]",
        BATON_LOG_LEVEL="ERROR",
        PYTHONPATH=str(REPO),
    )
    return subprocess.run(
        [sys.executable, "-m", "bot.main", *args],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "hello.yaml").write_text(HELLO)
    for name, (text, _, _) in BROKEN.items():
        (workflows / name).write_text(text)
    return tmp_path


def test_baton_list_names_each_broken_file_with_its_line_and_fix(home: Path) -> None:
    listed = _baton(home, "list")

    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    for name, (_, cause, fix) in BROKEN.items():
        path = str(home / "workflows" / name)
        (row,) = [i for i, line in enumerate(lines) if f"ERROR {path}{cause}" in line]
        assert lines[row + 1].strip().startswith(f"fix: {fix}"), lines[row : row + 2]
    assert any(line.startswith("hello ") and "ERROR" not in line for line in lines)


def test_the_other_workflows_still_run(home: Path) -> None:
    said = _baton(home, "say", "--wait", "run hello from-the-test")

    assert said.returncode == 0, said.stderr
    assert "completed" in said.stdout
    assert "hello from-the-test" in said.stdout
