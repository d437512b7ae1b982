"""Discovery over several directories: precedence, broken files listed, cheap reloads."""

from __future__ import annotations

import logging
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from core.commands.hints import hint
from core.errors import UnknownWorkflow, WorkflowDefinitionError
from core.workflows.catalog import Catalog
from tests.unit.workflows.conftest import FIXTURES


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def _simple(name: str, command: str = "echo") -> str:
    return f"name: {name}\nnodes:\n  - id: a\n    bash: {command}\n"


def test_discovers_yaml_and_yml_and_skips_other_files(tmp_path: Path) -> None:
    _write(tmp_path / "one.yaml", _simple("one"))
    _write(tmp_path / "two.yml", _simple("two"))
    _write(tmp_path / "tools.py", "x = 1\n")
    _write(tmp_path / "notes.txt", "name: three\n")
    _write(tmp_path / "nested" / "deep.yaml", _simple("deep"))
    catalog = Catalog([tmp_path])
    assert catalog.names() == ["one", "two"]
    assert catalog.get("two").source == str(tmp_path / "two.yml")


def test_broken_file_is_listed_with_its_error_and_hides_nothing(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "broken", tmp_path, dirs_exist_ok=True)
    _write(tmp_path / "good.yaml", _simple("good"))
    catalog = Catalog([tmp_path])
    entries = {e.name: e for e in catalog.entries()}
    assert sorted(entries) == ["cycle", "good", "syntax"]
    assert entries["good"].ok and entries["good"].workflow is not None
    assert entries["cycle"].workflow is None
    assert entries["cycle"].error is not None
    assert "cycle: a -> b -> a" in entries["cycle"].error.message
    with pytest.raises(WorkflowDefinitionError, match="YAML syntax error") as info:
        catalog.get("syntax")
    assert info.value.line == 4
    assert catalog.get("good").name == "good"


def test_a_file_nested_too_deeply_is_listed_as_broken(tmp_path: Path) -> None:
    _write(tmp_path / "deep.yaml", "name: deep\nnodes: " + "[" * 5000 + "]" * 5000 + "\n")
    _write(tmp_path / "good.yaml", _simple("good"))
    entries = {e.name: e for e in Catalog([tmp_path]).entries()}
    assert sorted(entries) == ["deep", "good"]
    assert entries["good"].ok
    error = entries["deep"].error
    assert error is not None
    assert (error.line, error.message) == (2, f"{tmp_path / 'deep.yaml'}:2: the file is nested too deeply")


def test_unknown_workflow_suggests_the_closest_name(tmp_path: Path) -> None:
    _write(tmp_path / "r.yaml", _simple("release-notes"))
    catalog = Catalog([tmp_path])
    with pytest.raises(UnknownWorkflow) as info:
        catalog.get("release-note")
    assert info.value.message == "no workflow named `release-note`; did you mean `release-notes`?"
    assert "/workflow list" in hint(info.value)
    with pytest.raises(UnknownWorkflow) as info:
        catalog.get("zzz")
    assert info.value.message == "no workflow named `zzz`"


def test_later_directory_overrides_with_one_warning_naming_both_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    base = _write(tmp_path / "base" / "deploy.yaml", _simple("deploy", "echo base"))
    local = _write(tmp_path / "local" / "mine.yaml", _simple("deploy", "echo local"))
    with caplog.at_level(logging.WARNING, logger="baton.catalog"):
        catalog = Catalog([base.parent, local.parent])
        catalog.reload()
        catalog.reload()
    assert catalog.get("deploy").nodes[0].bash == "echo local"
    (entry,) = catalog.entries()
    assert entry.path == local
    assert entry.overrides == base
    warnings = [r.getMessage() for r in caplog.records if "overrides" in r.getMessage()]
    assert warnings == [f"workflow `deploy` from {local} overrides {base}"]


def test_broken_override_is_not_silently_replaced_by_the_older_file(tmp_path: Path) -> None:
    _write(tmp_path / "base" / "w.yaml", _simple("w"))
    _write(tmp_path / "local" / "w.yaml", "name: w\nnodes:\n  - id: a\n")
    catalog = Catalog([tmp_path / "base", tmp_path / "local"])
    with pytest.raises(WorkflowDefinitionError, match="node `a` has no kind"):
        catalog.get("w")


def test_duplicate_name_in_one_directory_is_an_error_for_the_second_file(tmp_path: Path) -> None:
    _write(tmp_path / "a.yaml", _simple("same"))
    second = _write(tmp_path / "b.yaml", "# comment\nname: same\nnodes: [{id: a, bash: echo}]\n")
    catalog = Catalog([tmp_path])
    assert catalog.get("same").source == str(tmp_path / "a.yaml")
    broken = [e for e in catalog.entries() if e.error is not None]
    assert len(broken) == 1
    assert broken[0].path == second
    assert broken[0].error is not None
    assert broken[0].error.line == 2
    assert "workflow name `same` is already used by a.yaml in the same directory" in broken[0].error.message


def test_reload_rereads_only_changed_files(tmp_path: Path) -> None:
    stable = _write(tmp_path / "stable.yaml", _simple("stable"))
    edited = _write(tmp_path / "edited.yaml", _simple("edited", "echo 1"))
    catalog = Catalog([tmp_path])
    before_stable, before_edited = catalog.get("stable"), catalog.get("edited")

    catalog.reload()
    assert catalog.get("stable") is before_stable
    assert catalog.get("edited") is before_edited

    edited.write_text(_simple("edited", "echo 2"), encoding="utf-8")  # same size: bump mtime too
    stat = edited.stat()
    os.utime(edited, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    _write(tmp_path / "new.yaml", _simple("new"))
    catalog.reload()
    assert catalog.get("stable") is before_stable
    assert catalog.get("edited").nodes[0].bash == "echo 2"
    assert catalog.names() == ["edited", "new", "stable"]

    stable.unlink()
    catalog.reload()
    assert catalog.names() == ["edited", "new"]
    with pytest.raises(UnknownWorkflow):
        catalog.get("stable")


def test_a_fixed_file_comes_back(tmp_path: Path) -> None:
    path = _write(tmp_path / "w.yaml", "name: w\nnodes:\n  - id: a\n")
    catalog = Catalog([tmp_path])
    assert catalog.entries()[0].error is not None
    path.write_text(_simple("w"), encoding="utf-8")
    catalog.reload()
    assert catalog.get("w").nodes[0].kind == "bash"


def test_missing_directory_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _write(tmp_path / "ok" / "w.yaml", _simple("w"))
    with caplog.at_level(logging.WARNING, logger="baton.catalog"):
        catalog = Catalog([tmp_path / "absent", tmp_path / "ok"])
    assert catalog.names() == ["w"]
    assert any("does not exist" in r.getMessage() for r in caplog.records)


def test_same_size_rewrite_within_one_timestamp_tick_is_seen(tmp_path: Path) -> None:
    path = _write(tmp_path / "w.yaml", _simple("w", "echo 1"))
    catalog = Catalog([tmp_path])
    first = catalog.get("w")
    stat = path.stat()
    path.write_text(_simple("w", "echo 2"), encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, same mtime: a racy write
    catalog.reload()
    assert catalog.get("w").nodes[0].bash == "echo 2"
    assert catalog.get("w") is not first


def test_recheck_of_an_unchanged_recent_file_keeps_the_same_object(tmp_path: Path) -> None:
    _write(tmp_path / "w.yaml", _simple("w"))
    catalog = Catalog([tmp_path])
    first = catalog.get("w")
    for _ in range(3):
        catalog.reload()
    assert catalog.get("w") is first


def test_broken_file_recovers_when_the_script_it_names_appears(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _write(tmp_path / "w.yaml", "name: w\nnodes:\n  - id: a\n    script: steps/run.py\n")
    with caplog.at_level(logging.WARNING, logger="baton.catalog"):
        catalog = Catalog([tmp_path])
        catalog.reload()
    with pytest.raises(WorkflowDefinitionError, match="does not exist"):
        catalog.get("w")
    assert len([r for r in caplog.records if "is broken" in r.getMessage()]) == 1
    _write(tmp_path / "steps" / "run.py", "print('ok')\n")
    catalog.reload()
    assert catalog.get("w").nodes[0].script == "steps/run.py"


def test_a_secret_the_operator_does_not_provide_is_a_load_error_with_its_line_and_where_to_provide_it(
    tmp_path: Path,
) -> None:
    _write(tmp_path / "steal.yaml", """
        name: steal
        secrets: [NPM_TOKEN]
        nodes:
          - id: a
            bash: echo a
          - id: b
            secrets:
              - PGPASSWORD
            bash: echo b
        """)
    _write(tmp_path / "good.yaml", _simple("good"))
    provided = {"NPM_TOKEN"}
    catalog = Catalog([tmp_path], secrets=lambda: provided)
    entries = {e.name: e for e in catalog.entries()}
    assert entries["good"].ok and entries["steal"].workflow is None
    error = entries["steal"].error
    assert error is not None and error.line == 8  # the line naming PGPASSWORD
    assert error.message == (
        f"{tmp_path / 'steal.yaml'}:8: secret `PGPASSWORD` is not a step secret the operator provides; "
        "a workflow may name only those (never a variable of Baton's own environment)"
    )
    assert "BATON_SECRETS_FILE" in (error.hint or "") and "BATON_STEP_SECRETS" in (error.hint or "")
    with pytest.raises(WorkflowDefinitionError, match="PGPASSWORD"):
        catalog.get("steal")
    provided.add("PGPASSWORD")  # the operator puts it in the secrets file: the next reload sees it
    catalog.reload()
    assert catalog.get("steal").name == "steal"
    assert Catalog([tmp_path]).get("steal").name == "steal"  # a file checked alone: no rule applies
