"""The import contracts of `make lint` (pyproject.toml, `[tool.importlinter]`) bite: an import
planted in a copy of the tree breaks the contract that forbids it, and only that one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    for package in ("core", "bot", "adapters"):
        shutil.copytree(ROOT / package, tree / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=120)


def _verdicts(output: str) -> dict[str, str]:
    """Each contract's name -> KEPT or BROKEN, from lint-imports' summary (names wrap lines)."""
    body = output.split("Contracts\n", 1)[-1].split("\nContracts:", 1)[0].split("\n\n", 1)[-1]
    verdicts, words = {}, []
    for word in body.split():
        if word in ("KEPT", "BROKEN"):
            verdicts[" ".join(words)] = word
            words = []
        elif not set(word) <= {"-"}:
            words.append(word)
    return verdicts


BACK_UP = "no arrow runs back up in core"
PLANTED = [
    ("adapters/slack/planted.py", "import adapters.discord.buttons\n", "adapters never import each other"),
    ("core/delivery/planted.py", "from core.commands.messages import Reply\n", BACK_UP),
    ("core/workflows/planted.py", "from core.config import Settings\n", BACK_UP),
]


def test_the_tree_as_it_is_keeps_every_contract(tmp_path: Path) -> None:
    result = _lint(_copy(tmp_path))
    assert result.returncode == 0, result.stdout
    verdicts = _verdicts(result.stdout)
    assert len(verdicts) >= 5 and set(verdicts.values()) == {"KEPT"}


@pytest.mark.parametrize(("path", "line", "contract"), PLANTED, ids=[p[0] for p in PLANTED])
def test_a_planted_import_breaks_the_contract_that_forbids_it(
    tmp_path: Path, path: str, line: str, contract: str
) -> None:
    tree = _copy(tmp_path)
    (tree / path).write_text(f"from __future__ import annotations\n\n{line}")
    result = _lint(tree)
    assert result.returncode != 0
    broken = [name for name, verdict in _verdicts(result.stdout).items() if verdict == "BROKEN"]
    assert len(broken) == 1 and broken[0].startswith(contract), result.stdout
