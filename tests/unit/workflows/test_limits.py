"""What a workflow file may ask of the bot: alias expansion, size, timeouts, paths; a broken
file is parsed once per change; templates render within their budget."""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

import pytest

from core.errors import RenderBudgetExceeded, WorkflowDefinitionError
from core.workflows.catalog import Catalog
from core.workflows.limits import LoadLimits
from core.workflows.loader import load_workflow_file, load_workflow_text
from core.workflows.render_budget import RenderLimits
from core.workflows.templating import render_template, template_references

LAUGHS = "\n".join(
    ["name: laughs", 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]" for i in range(8)]
    + ["nodes: [{id: x, bash: echo *i}]", ""]
)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_billion_laughs_is_refused_at_the_alias_that_crosses_the_bound() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(WorkflowDefinitionError) as caught:
        load_workflow_text(LAUGHS, file="laughs.yaml")
    assert "YAML aliases expand to more than 10,000 nodes" in caught.value.message
    assert caught.value.line is not None and caught.value.line > 1
    assert "BATON_YAML_MAX_ALIAS_NODES" in caught.value.hint
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50_000  # KB


def test_a_small_anchor_used_a_few_times_still_loads() -> None:
    text = "name: ok\ndefaults: &d {timeout: 5}\nnodes:\n  - {id: a, bash: 'true', timeout: 5}\n"
    assert load_workflow_text(text).name == "ok"


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    path = _write(tmp_path / "big.yaml", "name: big\nnodes: [{id: a, bash: 'true'}]\n# " + "x" * 2_000 + "\n")
    with pytest.raises(WorkflowDefinitionError, match="over the limit of 1,000") as caught:
        load_workflow_file(path, limits=LoadLimits(max_file_bytes=1_000))
    assert caught.value.line == 1 and "BATON_WORKFLOW_MAX_BYTES" in caught.value.hint
    catalog = Catalog([tmp_path], limits=LoadLimits(max_file_bytes=1_000))
    (entry,) = catalog.entries()
    assert entry.error is not None and "over the limit" in entry.error.message
    assert catalog.parses == 0


@pytest.mark.parametrize("value", [".inf", ".nan", "-.inf"])
def test_an_infinite_timeout_is_refused(value: str) -> None:
    with pytest.raises(WorkflowDefinitionError) as caught:
        load_workflow_text(
            f"name: t\nnodes:\n  - id: a\n    bash: 'true'\n    timeout: {value}\n", file="t.yaml"
        )
    assert caught.value.line == 5


def test_a_timeout_over_the_cap_names_the_setting() -> None:
    text = "name: t\nnodes:\n  - id: a\n    bash: 'true'\n    timeout: 100000\n"
    with pytest.raises(WorkflowDefinitionError, match="over the limit of 86400 s") as caught:
        load_workflow_text(text, file="t.yaml")
    assert caught.value.line == 5 and "BATON_MAX_STEP_TIMEOUT" in caught.value.hint
    assert load_workflow_text(text, limits=LoadLimits(max_timeout=100_000)).nodes[0].timeout == 100_000


@pytest.mark.parametrize(
    ("field", "value", "line"),
    [
        ("script", "/proc/self/environ.py", 4),
        ("script", "../outside/evil.py", 4),
        ("files", "[../outside/evil.py]", 5),
        ("files", "[/etc/passwd]", 5),
        ("artifacts", '["../../../x/*"]', 5),
        ("artifacts", '["/tmp/*"]', 5),
    ],
)
def test_paths_leading_out_of_their_directory_are_load_errors(
    tmp_path: Path, field: str, value: str, line: int
) -> None:
    _write(tmp_path / "outside" / "evil.py", "print('evil')\n")
    kind = f"    script: {value}\n" if field == "script" else f"    bash: 'true'\n    {field}: {value}\n"
    path = _write(tmp_path / "wf" / "w.yaml", f"name: w\nnodes:\n  - id: a\n{kind}")
    with pytest.raises(WorkflowDefinitionError) as caught:
        load_workflow_file(path)
    assert caught.value.file == str(path) and caught.value.line == line
    assert "outside the workflow's directory" in caught.value.message or "leaves the run directory" in (
        caught.value.message
    )


def test_a_symlink_out_of_the_workflow_directory_is_a_load_error(tmp_path: Path) -> None:
    _write(tmp_path / "outside" / "evil.py", "print('evil')\n")
    (tmp_path / "wf").mkdir()
    os.symlink(tmp_path / "outside" / "evil.py", tmp_path / "wf" / "step.py")
    path = _write(tmp_path / "wf" / "w.yaml", "name: w\nnodes:\n  - id: a\n    script: step.py\n")
    with pytest.raises(WorkflowDefinitionError, match="outside the workflow's directory") as caught:
        load_workflow_file(path)
    assert caught.value.line == 4


def test_a_broken_file_is_parsed_once_until_it_changes(tmp_path: Path) -> None:
    path = _write(tmp_path / "laughs.yaml", LAUGHS)
    old = time.time() - 60  # not "racily clean": the stamp alone decides
    os.utime(path, (old, old))
    catalog = Catalog([tmp_path])
    for _ in range(5):
        catalog.reload()
        (entry,) = catalog.entries()
        assert entry.error is not None and "YAML aliases" in entry.error.message
    assert catalog.parses == 1
    _write(path, "name: laughs\nnodes: [{id: a, bash: 'true'}]\n")
    catalog.reload()
    assert catalog.get("laughs").nodes[0].id == "a" and catalog.parses == 2


def test_the_pathological_constants_are_never_folded_while_loading(tmp_path: Path) -> None:
    _write(
        tmp_path / "p.yaml",
        "name: p\nnodes:\n  - id: a\n    prompt: \"{{ 'x' * 10**9 }}{{ 'y' | center(1000000000) }}\"\n",
    )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    (entry,) = Catalog([tmp_path]).entries()
    assert entry.ok
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50_000  # KB
    assert template_references("{{ 'x' * 10**9 }}").names == frozenset()


@pytest.mark.parametrize(
    ("template", "limit"),
    [
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            "loop iterations",
        ),
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxxxx{% endfor %}{% endfor %}",
            "characters",
        ),
        ("{{ 'x' * 10**9 }}", "characters"),
        ("{{ 2 ** 1000000000 }}", "characters"),
        ("{{ 'x'.ljust(10**9) }}", "characters"),
        ("{{ 'x' | center(1000000000) }}", "characters"),
        ("{{ '%01000000000d' % 1 }}", "characters"),
        (
            "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
            "characters",
        ),
    ],
)
def test_pathological_templates_stop_at_their_budget_with_one_line(template: str, limit: str) -> None:
    with pytest.raises(RenderBudgetExceeded) as caught:
        render_template(template, {}, limits=RenderLimits(seconds=60, max_chars=100_000, max_steps=200_000))
    assert limit in caught.value.message and "\n" not in caught.value.message


def test_a_render_past_its_time_budget_names_the_setting() -> None:
    template = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    with pytest.raises(RenderBudgetExceeded, match=r"longer than 0\.2 s") as caught:
        render_template(template, {}, limits=RenderLimits(seconds=0.2, max_steps=10**12))
    assert "BATON_RENDER_TIMEOUT" in caught.value.hint
