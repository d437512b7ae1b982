"""Scorecard scenarios for `map:` and `workflow:` steps (#31): edits between a run and its
resume, each with the units of work that must run again, written by hand from the semantics.

A *unit* is one piece of work a step really does: a plain step (`hosts`, `report`), one item
of the map step by its value (`deploy:web-1`: an item is its value, wherever it stands in the
list), or one step of the child run the `workflow:` step starts (`child:draft`). Each unit
appends its name to `ran.log` in its run's directory when it runs, so "ran" is counted from
what really executed, not from the journal (a moved item's row is written again at its new
position without running it).

Base: `fleet` maps `deploy` over the hosts an earlier step lists, and runs `notes-child` as a
sub-workflow; `report` reads both. Some scenarios start from a base run that failed (a broken
item, a broken child step): the fix is the edit, and the resume must run exactly the failed
part and what depends on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from bench.scorecard.corpus import edit

PARENT = """\
name: fleet
description: Scorecard fleet (map and sub-workflow)
defaults: {replay: pure}
inputs:
  hosts: {type: array}
  tag: {type: string}
  audience: {type: string}
nodes:
  - id: hosts
    bash: |
      echo hosts >> ran.log
      echo "{{ inputs.hosts }}"
    output: {format: json}
  - id: deploy
    depends_on: [hosts]
    map: {items: "{{ nodes.hosts.output }}", as: host, max_parallel: 4}
    bash: |
      echo "deploy:{{ host }}" >> ran.log
      if grep -qx "{{ host }}" "$BATON_WORKFLOW_DIR/broken.txt" 2>/dev/null; then echo down >&2; exit 1; fi
      echo "deployed {{ host }} {{ inputs.tag }}"
  - id: notes
    workflow: notes-child
    with: {audience: "{{ inputs.audience }}"}
  - id: report
    depends_on: [deploy, notes]
    bash: |
      echo report >> ran.log
      echo "{{ nodes.deploy.ok_count }} hosts; {{ nodes.notes.output.outputs.publish }}"
"""

CHILD = """\
name: notes-child
description: Release notes (the sub-workflow)
defaults: {replay: pure}
inputs:
  audience: {type: string}
nodes:
  - id: draft
    bash: |
      echo child:draft >> ran.log
      echo "notes for {{ inputs.audience }}"
  - id: style
    bash: |
      echo child:style >> ran.log
      echo "plain style"
  - id: publish
    depends_on: [draft, style]
    bash: |
      echo child:publish >> ran.log
      if [ -e "$BATON_WORKFLOW_DIR/child-broken.txt" ]; then echo "registry down" >&2; exit 1; fi
      echo "published {{ nodes.draft.output }} ({{ nodes.style.output }})"
"""

BASE_ARGS = '{"hosts": ["web-1", "web-2", "db-1"], "tag": "v1", "audience": "devs"}'
HOST_UNITS = ("deploy:web-1", "deploy:web-2", "deploy:db-1")
CHILD_UNITS = ("child:draft", "child:style", "child:publish")


@dataclass(frozen=True)
class MapScenario:
    name: str
    what: str  # the edit, in words
    must_rerun: frozenset[str]
    parent: str = PARENT
    child: str = CHILD
    args: str = BASE_ARGS
    #: files in the workflow directory at the base run (a broken item or child step), removed after
    base_files: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    resume: bool = False  # the base run failed: `resume` it (else `--resume-from` it)


SCENARIOS: tuple[MapScenario, ...] = (
    MapScenario("map-unchanged", "resume with nothing changed: no item, no child step runs", frozenset()),
    MapScenario(
        "map-item-added",
        "add a host at the end of the list",
        frozenset({"hosts", "deploy:app-1", "report"}),
        args=edit(BASE_ARGS, '"db-1"]', '"db-1", "app-1"]'),
    ),
    MapScenario(
        "map-item-added-first",
        "add a host at the start of the list (every other host moves one place)",
        frozenset({"hosts", "deploy:app-1", "report"}),
        args=edit(BASE_ARGS, '["web-1"', '["app-1", "web-1"'),
    ),
    MapScenario(
        "map-item-changed",
        "change one host of the list",
        frozenset({"hosts", "deploy:web-3", "report"}),
        args=edit(BASE_ARGS, '"web-2"', '"web-3"'),
    ),
    MapScenario(
        "map-items-reordered",
        "reverse the list (same hosts)",
        frozenset({"hosts", "report"}),
        args=edit(BASE_ARGS, '["web-1", "web-2", "db-1"]', '["db-1", "web-2", "web-1"]'),
    ),
    MapScenario(
        "map-item-removed",
        "remove a host from the list",
        frozenset({"hosts", "report"}),
        args=edit(BASE_ARGS, '"web-2", ', ""),
    ),
    MapScenario(
        "map-input-every-item-reads",
        "change an input every item reads (each host is deployed again)",
        frozenset({*HOST_UNITS, "report"}),
        args=edit(BASE_ARGS, '"v1"', '"v2"'),
    ),
    MapScenario(
        "map-step-edit",
        "edit the mapped step's command (each item runs again)",
        frozenset({*HOST_UNITS, "report"}),
        parent=edit(PARENT, 'echo "deployed {{ host }}', 'echo "shipped {{ host }}'),
    ),
    MapScenario(
        "map-failed-item-alone",
        "one host failed in the base run; fix it and resume: it runs alone (then what reads the map)",
        frozenset({"deploy:web-2", "report"}),
        base_files=MappingProxyType({"broken.txt": "web-2\n"}),
        resume=True,
    ),
    MapScenario(
        "sub-child-edited",
        "edit one step of the child workflow (the parent's YAML unchanged)",
        frozenset({"child:style", "child:publish", "report"}),
        child=edit(CHILD, 'echo "plain style"', 'echo "house style"'),
    ),
    MapScenario(
        "sub-child-reformatted",
        "reformat the child workflow (description, comments, flow vs block style): nothing runs",
        frozenset(),
        child=CHILD.replace("description: Release notes (the sub-workflow)", "description: Notes  # v2")
        .replace("defaults: {replay: pure}", "defaults:\n  replay: pure  # every step"),
    ),
    MapScenario(
        "sub-child-same-output",
        "edit a child step so it runs again but prints the same: what follows stays cached",
        frozenset({"child:style"}),
        child=edit(CHILD, 'echo "plain style"', "echo 'plain style'"),
    ),
    MapScenario(
        "sub-args-changed",
        "change the input the parent passes to the child (`with:`)",
        frozenset({"child:draft", "child:publish", "report"}),
        args=edit(BASE_ARGS, '"devs"', '"managers"'),
    ),
    MapScenario(
        "sub-failed-child-resumed",
        "the child's last step failed in the base run; fix it and resume the parent: only it runs",
        frozenset({"child:publish", "report"}),
        base_files=MappingProxyType({"child-broken.txt": "yes\n"}),
        resume=True,
    ),
)
