"""README's settings table names every setting Baton reads: each field of `Settings`
(`core/config.py`) as `BATON_<NAME>`, in the first column of a row of the table under
"## Configuration" (a row may name a pair, `BATON_A` / `BATON_B`). And it names none that
Baton does not read."""

from __future__ import annotations

import re
from pathlib import Path

from core.config import Settings

README = Path(__file__).parents[3] / "README.md"


def _table_variables() -> set[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Configuration", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `BATON_"):
            first = line.split(" | ", 1)[0]
            names |= set(re.findall(r"`(BATON_[A-Z0-9_]+)`", first))
    return names


def test_every_setting_baton_reads_has_a_row_in_readmes_settings_table() -> None:
    read = {f"BATON_{name.upper()}" for name in Settings.model_fields}
    listed = _table_variables()
    assert sorted(read - listed) == [], "settings Baton reads that README's table does not list"
    assert sorted(listed - read) == [], "settings README's table lists that Baton does not read"


def test_every_shipped_example_workflow_is_listed_in_the_workflows_doc() -> None:
    root = README.parent
    intro = (root / "docs" / "workflows.md").read_text(encoding="utf-8").split("```", 1)[0]
    listed = set(re.findall(r"`(?:workflows/)?([\w.-]+\.ya?ml)`", intro))
    shipped = {p.name for p in (root / "workflows").glob("*.y*ml")}
    assert sorted(shipped - listed) == []
