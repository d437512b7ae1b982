"""The bench environment (.venv-bench, bench/requirements.lock) runs the project's own code, so
it pins every runtime dependency at the project's version: a package missing there made the run
pages section fail inside `make bench` (`KeyError: 'url'`, the page link never made) while every
test passed in the project's .venv."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
#: pinned differently on purpose (bench/requirements.lock's header says why)
DIFFERENT = {"python-dateutil"}


def _name(requirement: str) -> str:
    name = re.split(r"[\[<>=~! ;]", requirement, maxsplit=1)[0]
    return name.strip().lower().replace("_", "-").replace(".", "-")


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#") and "==" in line:
            name, version = line.split("==", 1)
            pins[_name(name)] = version.strip()
    return pins


def test_every_runtime_dependency_is_in_the_bench_lock_at_the_projects_version() -> None:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    project, bench = _pins(ROOT / "requirements.lock"), _pins(ROOT / "bench" / "requirements.lock")
    missing = sorted(_name(d) for d in dependencies if _name(d) not in bench)
    assert missing == []
    differ = sorted(n for n, v in project.items() if n in bench and bench[n] != v and n not in DIFFERENT)
    assert differ == []
