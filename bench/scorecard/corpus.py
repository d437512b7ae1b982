"""The scorecard corpus: edits a person makes between a run and its resume, each with the
nodes that must re-run (written by hand from the semantics, not computed by Baton).

Every scenario starts from the same base: the workflow `pipe` (below), its script, data
file and tool module (with a helper module beside it), the arguments as typed, the prompt
provider settings and the operator's secret values. A scenario changes some of these and/or
invalidates results of the base run, then a new run resumes from the base run (with the
scenario's settings, as after a restart). A node *must* re-run when what it computes may
differ: its definition (including a script's or declared file's content) changed, an input
it can see changed, an upstream output it reads changed, the code of the tool it calls
changed, what answers its prompt changed, an `env:` value it reads changed, it was
invalidated, or it is `memoize: false`. Every other node is safe to skip: serving the base
run's result is exactly what running it again would produce.

`@WF@` in texts stands for the directory the workflow is written to, `@OPENAI@` in settings
for the base URL of the local OpenAI-compatible endpoint the runner serves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import yaml

NODES = ("fetch", "count", "summarize", "notes", "lint", "publish")

_HEAD = (
    "name: pipe\ndescription: Scorecard pipeline\ndefaults: {replay: pure}\n"
    "env: {REGION: eu-west-1}\nsecrets: [PUBLISH_TOKEN]\nnodes:\n"
)
_FETCH = "  - id: fetch\n    script: scripts/fetch.py\n"
_COUNT = "  - id: count\n    bash: echo v{{ inputs.version }}\n"
_LINT = '  - id: lint\n    files: [rules.txt]\n    bash: head -c 60 @WF@/rules.txt; echo " ($REGION)"\n'
_REST = """\
  - id: summarize
    depends_on: [fetch]
    prompt: "Summarize for {{ inputs.audience }}: {{ nodes.fetch.output }}"
  - id: notes
    depends_on: [summarize, count]
    bash: echo {{ nodes.summarize.output }} {{ nodes.count.output }}
"""
_PUBLISH = """\
  - id: publish
    depends_on: [notes, lint]
    tool: publish
    with: {channel: "#releases", text: "{{ nodes.notes.output }} / {{ nodes.lint.output }}"}
"""
BASE_YAML = _HEAD + _FETCH + _COUNT + _REST + _LINT + _PUBLISH

FETCH_PY = """\
import json, sys
inputs = json.load(sys.stdin)["inputs"]
# the commits of the repository
print(f"commits of {inputs['repo']}: a1 b2 c3")
"""

# a registry of its own: `@tool` would register into the process-wide default registry,
# where the same tool from another scenario's directory is a conflict
TOOLS_PY = """\
\"\"\"The scorecard pipeline's tool.\"\"\"
import format_helpers
from core.engine.tools import ToolRegistry

tool = ToolRegistry().tool


@tool("publish", replay="pure", inline=True)
def publish(channel: str, text: str) -> str:
    return format_helpers.line(channel, text)
"""

HELPER_PY = """\
def line(channel: str, text: str) -> str:
    return f"{channel}: {text}"
"""

BASE_FILES: Mapping[str, str] = MappingProxyType(
    {
        "scripts/fetch.py": FETCH_PY,
        "rules.txt": "rule 1: no trailing spaces\n",
        "tools.py": TOOLS_PY,
        "format_helpers.py": HELPER_PY,
    }
)

#: prompt provider settings (`Settings` fields); `command` is configured, `fake` answers
FAKE: Mapping[str, str] = MappingProxyType({"prompt_provider": "fake", "prompt_command": "sed s/^/cmd:/"})
OPENAI: Mapping[str, str] = MappingProxyType(
    {"prompt_provider": "openai", "openai_base_url": "@OPENAI@", "openai_model": "gpt-4o-mini"}
)
#: the operator's environment: the value of the secret the workflow declares
SECRETS: Mapping[str, str] = MappingProxyType({"PUBLISH_TOKEN": "token-1"})

BASE_ARGS = '{"version": "1.2.3", "repo": "baton", "audience": "devs", "ticket": "T-1"}'


def edit(text: str, old: str, new: str) -> str:
    """`text` with `old` replaced once; a corpus bug if `old` is not there."""
    if text.count(old) != 1:
        raise ValueError(f"corpus edit: {old!r} occurs {text.count(old)} times")
    return text.replace(old, new)


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str  # the edit, in words
    must_rerun: frozenset[str]
    yaml: str = BASE_YAML
    files: Mapping[str, str] = field(default_factory=lambda: BASE_FILES)
    args: str = BASE_ARGS
    invalidate: tuple[tuple[str, bool], ...] = ()  # (node, downstream) on the base run
    base_settings: Mapping[str, str] = field(default_factory=lambda: FAKE)  # provider settings, base run
    settings: Mapping[str, str] = field(default_factory=lambda: FAKE)  # ... and resumed (and truth) run
    base_secrets: Mapping[str, str] = field(default_factory=lambda: SECRETS)  # operator's secret values
    secrets: Mapping[str, str] = field(default_factory=lambda: SECRETS)

    @property
    def nodes(self) -> tuple[str, ...]:
        """The node ids of the edited workflow, in file order."""
        return tuple(node["id"] for node in yaml.safe_load(self.yaml)["nodes"])


_FILE_KEYS = {
    "fetch": "scripts/fetch.py",
    "rules": "rules.txt",
    "tools": "tools.py",
    "helper": "format_helpers.py",
}


def _files(**changes: str) -> Mapping[str, str]:
    merged = dict(BASE_FILES)
    for key, value in changes.items():
        merged[_FILE_KEYS[key]] = value
    return MappingProxyType(merged)


_ALL_DOWN_FROM_FETCH = frozenset({"fetch", "summarize", "notes", "publish"})
_ALL_DOWN_FROM_SUMMARIZE = frozenset({"summarize", "notes", "publish"})

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("unchanged", "resume with nothing changed", frozenset()),
    Scenario(
        "script-edit",
        "edit the producer's script file so its output changes (path in the YAML unchanged)",
        _ALL_DOWN_FROM_FETCH,
        files=_files(fetch=edit(FETCH_PY, "a1 b2 c3", "a1 b2 c3 d4")),
    ),
    Scenario(
        "script-comment",
        "edit only a comment in the producer's script: it re-runs with identical output",
        frozenset({"fetch"}),
        files=_files(fetch=edit(FETCH_PY, "# the commits", "# all the commits")),
    ),
    Scenario(
        "declared-file",
        "change the content of a file a step declares in `files:` and reads",
        frozenset({"lint", "publish"}),
        files=_files(rules="rule 1: no tabs\n"),
    ),
    Scenario(
        "bash-edit",
        "edit a bash step's command",
        frozenset({"count", "notes", "publish"}),
        yaml=edit(BASE_YAML, "echo v{{ inputs.version }}", "echo version-{{ inputs.version }}"),
    ),
    Scenario(
        "prompt-edit",
        "edit a prompt's text",
        frozenset({"summarize", "notes", "publish"}),
        yaml=edit(BASE_YAML, '"Summarize for', '"Briefly summarize for'),
    ),
    Scenario(
        "tool-with-edit",
        "change a literal `with:` value of the last (tool) step",
        frozenset({"publish"}),
        yaml=edit(BASE_YAML, '"#releases"', '"#announce"'),
    ),
    Scenario(
        "unrelated-input",
        "change an input no step template references (the script sees all inputs, prints the same)",
        frozenset({"fetch"}),
        args=edit(BASE_ARGS, '"T-1"', '"T-2"'),
    ),
    Scenario(
        "referenced-input",
        "change an input one bash step references (the script sees all inputs, prints the same)",
        frozenset({"fetch", "count", "notes", "publish"}),
        args=edit(BASE_ARGS, '"1.2.3"', '"1.2.4"'),
    ),
    Scenario(
        "prompt-input",
        "change an input the prompt references (and the script sees)",
        frozenset({"fetch", "summarize", "notes", "publish"}),
        args=edit(BASE_ARGS, '"devs"', '"managers"'),
    ),
    Scenario(
        "script-input",
        "change the input the script's output depends on",
        _ALL_DOWN_FROM_FETCH,
        args=edit(BASE_ARGS, '"baton"', '"baton-fork"'),
    ),
    Scenario(
        "args-reordered",
        "retype the same arguments with the keys in another order",
        frozenset(),
        args='{"ticket": "T-1", "audience": "devs", "repo": "baton", "version": "1.2.3"}',
    ),
    Scenario(
        "args-respaced",
        "retype the same arguments with other spacing",
        frozenset(),
        args='{ "version":"1.2.3",  "repo":"baton", "audience":"devs", "ticket":"T-1" }',
    ),
    Scenario(
        "yaml-reformatted",
        "reformat the YAML: quoting style, flow vs block lists, comments, description",
        frozenset(),
        yaml=BASE_YAML.replace("description: Scorecard pipeline", "description: Reformatted  # note")
        .replace("depends_on: [summarize, count]", "depends_on:\n      - summarize\n      - count")
        .replace("bash: echo v{{ inputs.version }}", "bash: 'echo v{{ inputs.version }}'"),
    ),
    Scenario(
        "nodes-reordered",
        "move steps around in the file (same graph)",
        frozenset(),
        yaml=_HEAD + _LINT + _COUNT + _FETCH + _REST + _PUBLISH,
    ),
    Scenario(
        "non-semantic-fields",
        "change a step's timeout and retry and the workflow description",
        frozenset(),
        yaml=edit(BASE_YAML, "    bash: echo v{{ inputs.version }}\n",
                  "    bash: echo v{{ inputs.version }}\n    timeout: 30\n    retry: {attempts: 2}\n")
        .replace("Scorecard pipeline", "Scorecard pipeline, v2"),
    ),
    Scenario(
        "invalidate",
        "invalidate one step's result (it re-runs and prints the same)",
        frozenset({"summarize"}),
        invalidate=(("summarize", False),),
    ),
    Scenario(
        "invalidate-downstream",
        "invalidate a step and everything downstream of it",
        frozenset({"summarize", "notes", "publish"}),
        invalidate=(("summarize", True),),
    ),
    Scenario(
        "invalidate-producer",
        "invalidate the producer (it re-runs with identical output)",
        frozenset({"fetch"}),
        invalidate=(("fetch", False),),
    ),
    Scenario(
        "memoize-false",
        "mark a step `memoize: false` (it re-runs every time; same output)",
        frozenset({"lint"}),
        yaml=edit(BASE_YAML, "    files: [rules.txt]\n", "    files: [rules.txt]\n    memoize: false\n"),
    ),
    Scenario(
        "new-step",
        "add a step in the middle of the file that nothing depends on",
        frozenset({"audit"}),
        yaml=edit(BASE_YAML, "  - id: notes\n", "  - id: audit\n    bash: echo audited\n  - id: notes\n"),
    ),
    Scenario(
        "renamed-step",
        "rename a step and its references (same computation)",
        frozenset(),
        yaml=BASE_YAML.replace("id: summarize", "id: digest")
        .replace("depends_on: [summarize, count]", "depends_on: [digest, count]")
        .replace("nodes.summarize.output", "nodes.digest.output"),
    ),
    Scenario(
        "script-edit-and-reorder",
        "edit the script's output and retype the arguments in another order",
        _ALL_DOWN_FROM_FETCH,
        files=_files(fetch=edit(FETCH_PY, "a1 b2 c3", "a1 b2")),
        args='{"audience": "devs", "ticket": "T-1", "version": "1.2.3", "repo": "baton"}',
    ),
    Scenario(
        "tool-edit",
        "fix the tool's body so its output changes (tools.py only, the YAML unchanged)",
        frozenset({"publish"}),
        files=_files(tools=edit(TOOLS_PY, "line(channel, text)", "line(channel, text.upper())")),
    ),
    Scenario(
        "tool-helper-edit",
        "change the helper module the tool imports from its own directory",
        frozenset({"publish"}),
        files=_files(helper=edit(HELPER_PY, 'f"{channel}: {text}"', 'f"{channel} | {text}"')),
    ),
    Scenario(
        "tool-reformatted",
        "reformat the tool module: comments, blank lines, quoting, line breaks",
        frozenset(),
        files=_files(
            tools=edit(
                TOOLS_PY,
                "    return format_helpers.line(channel, text)\n",
                "    # the helper formats the line\n"
                "    return format_helpers.line(\n        channel, text\n    )\n\n",
            ).replace('@tool("publish"', "@tool('publish'")
        ),
    ),
    Scenario(
        "provider-switch",
        "switch the default prompt provider (BATON_PROMPT_PROVIDER fake -> command)",
        _ALL_DOWN_FROM_SUMMARIZE,
        settings={**FAKE, "prompt_provider": "command"},
    ),
    Scenario(
        "command-edit",
        "change the command provider's command (another model)",
        _ALL_DOWN_FROM_SUMMARIZE,
        base_settings={**FAKE, "prompt_provider": "command"},
        settings={**FAKE, "prompt_provider": "command", "prompt_command": "sed s/^/other:/"},
    ),
    Scenario(
        "model-edit",
        "change BATON_OPENAI_MODEL (gpt-4o-mini -> gpt-4.1)",
        _ALL_DOWN_FROM_SUMMARIZE,
        base_settings=OPENAI,
        settings={**OPENAI, "openai_model": "gpt-4.1"},
    ),
    Scenario(
        "api-key-rotated",
        "rotate BATON_OPENAI_API_KEY (the same model answers)",
        frozenset(),
        base_settings={**OPENAI, "openai_api_key": "sk-one-0123456789"},
        settings={**OPENAI, "openai_api_key": "sk-two-9876543210"},
    ),
    Scenario(
        "node-provider",
        "give the prompt step its own `provider: command`",
        _ALL_DOWN_FROM_SUMMARIZE,
        yaml=edit(BASE_YAML, "    depends_on: [fetch]\n", "    depends_on: [fetch]\n    provider: command\n"),
    ),
    Scenario(
        "defaults-provider",
        "set `defaults.provider: command`, which the prompt step inherits",
        _ALL_DOWN_FROM_SUMMARIZE,
        yaml=edit(BASE_YAML, "defaults: {replay: pure}", "defaults: {replay: pure, provider: command}"),
    ),
    Scenario(
        "env-edit",
        "change an `env:` value one bash step prints",
        frozenset({"lint", "publish"}),
        yaml=edit(BASE_YAML, "REGION: eu-west-1", "REGION: us-east-2"),
    ),
    Scenario(
        "secret-rotated",
        "rotate the value of a secret the workflow declares (no step prints it)",
        frozenset(),
        secrets={"PUBLISH_TOKEN": "token-2"},
    ),
)
