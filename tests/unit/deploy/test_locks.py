"""Runtime and development dependencies are locked apart: `requirements.lock` is what a production
install takes (`pip install -r requirements.lock && pip install --no-deps .`), so it holds no test
runner, browser driver, linter or type checker; `requirements-dev.lock` adds those on top of it
(`make test` installs both)."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[3]
#: what only tests and `make lint` use; none of it may reach a production install
DEV_TOOLS = {
    "pytest", "pytest-asyncio", "pytest-timeout", "pytest-xdist", "hypothesis", "playwright",
    "ruff", "mypy", "import-linter", "types-pyyaml", "types-jsonschema",
}


def _name(requirement: str) -> str:
    name = re.split(r"[\[<>=~! ;]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith(("#", "-")) and "==" in line:
            name, version = line.split("==", 1)
            pins[_name(name)] = version.strip()
    return pins


def _direct(path: Path) -> set[str]:
    return {_name(line) for line in path.read_text().splitlines() if line and not line.startswith(("#", "-"))}


RUNTIME = _pins(ROOT / "requirements.lock")
DEV = _pins(ROOT / "requirements-dev.lock")


def test_the_runtime_lock_holds_no_development_package() -> None:
    assert sorted(DEV_TOOLS & RUNTIME.keys()) == []
    assert sorted(_direct(ROOT / "requirements-dev.in") & RUNTIME.keys()) == []
    # every dev-only pin (pytest's own dependencies too) stays out of the runtime lock
    assert sorted(DEV.keys() & RUNTIME.keys()) == []


def test_the_dev_lock_includes_the_runtime_lock_and_pins_every_dev_tool() -> None:
    lines = (ROOT / "requirements-dev.lock").read_text().splitlines()
    assert "-r requirements.lock" in lines
    assert "-c requirements.lock" in (ROOT / "requirements-dev.in").read_text().splitlines()
    assert sorted(DEV_TOOLS - DEV.keys()) == []


def test_every_runtime_dependency_is_pinned_in_the_runtime_lock() -> None:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert sorted({_name(d) for d in dependencies} - RUNTIME.keys()) == []
    assert sorted(_direct(ROOT / "requirements.in") - RUNTIME.keys()) == []


def test_the_runtime_lock_is_closed_under_each_packages_own_requirements() -> None:
    """A production install from the runtime lock alone pulls nothing unpinned: what each pinned
    package requires (as installed here, markers evaluated, no extras) is pinned there too."""
    unpinned = set()
    for name in RUNTIME:
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            applies = requirement.marker is None or requirement.marker.evaluate({"extra": ""})
            if applies and _name(requirement.name) not in RUNTIME:
                unpinned.add(f"{name} -> {requirement.name}")
    assert sorted(unpinned) == []


def test_python_311_and_newer_are_accepted() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"
    makefile = (ROOT / "Makefile").read_text()
    assert "sys.version_info < (3, 11)" in makefile
    assert "-r requirements.lock -r requirements-dev.lock" in makefile  # `make test`'s venv: both
