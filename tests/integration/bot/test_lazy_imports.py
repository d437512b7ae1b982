"""A restarted bot imports only what it runs on: the cold-start win, pinned by `sys.modules`.

A fresh interpreter builds the real `Baton` on a database that is already at the newest
schema (as after a crash), starts the engine, runs a workflow of tool steps (no templates,
no schemas) to completion and reports which heavy modules got imported. jsonschema, jinja2, httpx,
tenacity, alembic, procrastinate and the chat adapters are imported at their point of use
(a schema check, a template, the openai provider, a migration, the distributed executor, a
platform, an agent served over MCP), never by the restart path itself; the store's tables are
SQLAlchemy Core, so neither sqlmodel nor the ORM is imported at all, and on SQLite neither is SQLAlchemy's
PostgreSQL dialect (the indexes' PostgreSQL options are set when a PostgreSQL engine
opens). Not a timing test: it counts modules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
LAZY = ("jsonschema", "jinja2", "httpx", "tenacity", "alembic", "procrastinate", "prompt_toolkit", "rich",
        "sqlmodel", "mcp", "mcp_types", "httpx2", "sse_starlette", "starlette", "uvicorn", "playwright",
        "slack_sdk", "aiohttp", "mako")  # fmt: skip
ADAPTERS = ("adapters.slack", "adapters.discord", "adapters.console.interactive", "slack_bolt", "discord",
            "adapters.mcp", "adapters.web.app", "adapters.web.pages", "adapters.web.stream")  # fmt: skip

RESTART = textwrap.dedent(
    """
    import asyncio, json, sys
    from bot.serve import configured_adapters  # the `baton run` module, as the CLI imports it
    from bot.app import build_baton
    from bot.settings import load_settings

    async def main(workflow: str) -> str:
        baton = build_baton(load_settings())
        try:
            async with baton.running(handle_signals=False):
                run = await baton.engine.start_run(
                    workflow=workflow, args={}, platform="console", conversation="c",
                    thread=None, requester="console:t",
                )
                return (await baton.engine.wait(run.id, timeout=60)).status.value
        finally:
            baton.close()

    status = asyncio.run(main(sys.argv[1]))
    print(json.dumps({"status": status, "modules": sorted(sys.modules)}))
    """
)

PLAIN = "name: plain\nnodes:\n  - id: a\n    tool: ping\n  - id: b\n    depends_on: [a]\n    tool: ping\n"
TOOLS = "from core.engine.tools import tool\n\n@tool(replay='pure')\ndef ping() -> str:\n    return 'pong'\n"
TEMPLATED = (
    "name: templated\ninputs:\n  who: {default: you}\n"
    "nodes:\n  - id: a\n    bash: echo {{ inputs.who }}\n    replay: pure\n"
    "    output: {format: json, schema: {type: object}}\n"
)


def _restart(tmp_path: Path, workflow: str) -> tuple[str, set[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_")}
    env.update(
        BATON_DATABASE_URL=f"sqlite:///{tmp_path / 'baton.db'}",
        BATON_WORKFLOW_DIRS=json.dumps([str(tmp_path / "workflows")]),
        BATON_DATA_DIR=str(tmp_path / "data"),
        PYTHONPATH=str(ROOT),
    )
    proc = subprocess.run(
        [sys.executable, "-c", RESTART, workflow],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    return result["status"], set(result["modules"])


#: `baton say --wait 'run hello hi'` through the `baton` executable (bot.startup.main), as a user
#: types it; the modules it imported, printed when the process exits.
SAY = textwrap.dedent(
    """
    import atexit, json, os, sys

    spawned = []  # the programs this process started (its steps', the sandbox's probe …)
    sys.addaudithook(lambda event, args: event == "subprocess.Popen" and spawned.append(os.fsdecode(args[0])))

    def report():
        loader = sys.modules.get("pydantic.plugin._loader")  # None when no model was built
        scanned = loader is not None and loader._plugins is not None
        print("MODULES " + json.dumps({"modules": sorted(sys.modules), "plugins_scanned": scanned,
                                       "spawned": spawned}))

    atexit.register(report)
    sys.argv = ["baton", "say", "--wait", "run hello hi"]
    from bot.startup import main
    main()
    """
)


def _heavy(modules: set[str]) -> list[str]:
    return sorted(
        m
        for m in modules
        if m.split(".")[0] in LAZY or any(m == a or m.startswith(a + ".") for a in ADAPTERS)
    )


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "plain.yaml").write_text(PLAIN)
    (tmp_path / "workflows" / "tools.py").write_text(TOOLS)  # BATON_TOOL_MODULES' default
    _restart(tmp_path, "plain")  # the first start creates the schema (alembic) and runs once
    return tmp_path


def test_a_restart_imports_no_schema_template_http_migration_or_adapter_module(workdir: Path) -> None:
    status, modules = _restart(workdir, "plain")
    assert status == "completed"
    assert _heavy(modules) == []
    assert "sqlalchemy.orm" not in modules  # the store is SQLAlchemy Core: no ORM, no mappers
    # on SQLite, the PostgreSQL dialect (all its drivers) is never loaded, nor its index options
    assert not {m for m in modules if m.startswith("sqlalchemy.dialects.postgresql")}
    assert {"sqlalchemy", "core.engine.engine", "core.commands.handler"} <= modules  # it did run


def test_a_templated_workflow_with_a_schema_still_imports_what_it_uses(workdir: Path) -> None:
    """The lazy imports happen where they are needed (so the test above can fail)."""
    (workdir / "workflows" / "templated.yaml").write_text(TEMPLATED.replace("echo {{", "echo '{}' # {{"))
    status, modules = _restart(workdir, "templated")
    assert status == "completed"
    assert {"jinja2", "jsonschema"} <= modules
    assert not {"httpx", "alembic", "adapters.slack"} & modules


def _say(workdir: Path, **env_extra: str) -> dict[str, Any]:
    """`baton say --wait 'run hello hi'` in `workdir`: the modules it imported (`modules`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BATON_", "PYDANTIC_DISABLE_PLUGINS"))}
    env.update(
        BATON_DATABASE_URL=f"sqlite:///{workdir / 'baton.db'}",
        BATON_WORKFLOW_DIRS=json.dumps([str(workdir / "workflows")]),
        BATON_DATA_DIR=str(workdir / "data"),
        BATON_STEP_SANDBOX="none",
        PYTHONPATH=str(ROOT),
        **env_extra,
    )
    proc = subprocess.run([sys.executable, "-c", SAY], capture_output=True, text=True, env=env, cwd=workdir,
                          timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Hello from Baton: hi" in proc.stdout  # it ran the workflow and replied
    result: dict[str, Any] = json.loads(proc.stdout.split("MODULES ", 1)[1])
    result["modules"] = set(result["modules"])
    return result


def test_say_imports_no_chat_web_queue_migration_or_agent_module(workdir: Path) -> None:
    """The one-shot `say` path of the real executable: replies are rendered (jinja2), nothing else;
    pydantic never scans the installed packages for plugins (bot/startup.py `prepare`)."""
    (workdir / "workflows" / "hello.yaml").write_text((ROOT / "workflows" / "hello.yaml").read_text())
    result = _say(workdir)
    modules = result["modules"]
    assert [m for m in _heavy(modules) if m.split(".")[0] != "jinja2"] == []
    assert "sqlalchemy.orm" not in modules
    assert not {m for m in modules if m.startswith("sqlalchemy.dialects.postgresql")}
    assert {"sqlalchemy", "core.engine.engine", "bot.startup"} <= modules  # it did run, as `baton`
    assert "bot.compile_cache" in modules  # the executable compiles generated code through its cache
    assert "pydantic.main" in modules and not result["plugins_scanned"]  # models built, no plugin scan
    # the step ran (bash), and nothing looked for a library (ctypes.util runs `ldconfig -p`)
    assert any(os.path.basename(p) in ("bash", "sh", "dash") for p in result["spawned"]), result["spawned"]
    assert not [p for p in result["spawned"] if "ldconfig" in p or os.path.basename(p) in ("gcc", "cc", "ld")]


#: a schema and a cron expression: what loading the workflows checks with jsonschema and croniter
CHECKED = (
    "name: checked\nschedules:\n  - id: nightly\n    cron: '30 2 * * 1-5'\n    timezone: Europe/Paris\n"
    "nodes:\n  - id: a\n    bash: echo '{}'\n    replay: pure\n"
    "    output: {format: json, schema: {type: object, properties: {n: {type: integer}}}}\n"
)
#: jsonschema, croniter and what only they import (referencing, the metaschemas)
CHECKERS = ("jsonschema", "jsonschema_specifications", "referencing", "croniter")


def test_say_checks_a_schema_and_a_cron_expression_once_then_imports_neither_library(
    workdir: Path,
) -> None:
    """The `baton` executable remembers the checks that passed (core/workflows/check_memo.py, kept
    in bot/compile_cache.py's file, here in a bytecode directory of the test's): the next `say`
    loads the same workflows without importing the libraries that checked them."""
    (workdir / "workflows" / "hello.yaml").write_text((ROOT / "workflows" / "hello.yaml").read_text())
    (workdir / "workflows" / "checked.yaml").write_text(CHECKED)
    env = {"PYTHONPYCACHEPREFIX": str(workdir / "pycache"), "PYTHONDONTWRITEBYTECODE": ""}
    first = _say(workdir, **env)["modules"]
    assert {"jsonschema", "croniter"} <= first  # checked: the memo was empty
    second = _say(workdir, **env)["modules"]
    assert sorted(m for m in second if m.split(".")[0] in CHECKERS) == []
    assert {"core.workflows.check_memo", "core.workflows.schedule_spec"} <= second  # it loaded them
    # a schema edited to a wrong one: not remembered, so jsonschema checks it (and refuses it)
    (workdir / "workflows" / "checked.yaml").write_text(CHECKED.replace("type: integer", "type: integr"))
    broken = _say(workdir, **env)["modules"]
    assert "jsonschema" in broken


def test_an_install_that_cannot_write_its_cache_remembers_the_workflows_checks_when_filled(
    workdir: Path,
) -> None:
    """`python -m bot.compile_cache WORKFLOW_DIR` (docs/operations.md): a service that writes no
    bytecode then loads those workflows without importing jsonschema or croniter."""
    (workdir / "workflows" / "hello.yaml").write_text((ROOT / "workflows" / "hello.yaml").read_text())
    (workdir / "workflows" / "checked.yaml").write_text(CHECKED)
    env = {"PYTHONPYCACHEPREFIX": str(workdir / "pycache"), "PYTHONDONTWRITEBYTECODE": "1"}
    unfilled = _say(workdir, **env)["modules"]
    assert {"jsonschema", "croniter"} <= unfilled  # nothing saved: it writes no bytecode
    fill = subprocess.run([sys.executable, "-m", "bot.compile_cache", str(workdir / "workflows")],
                          capture_output=True, text=True, cwd=workdir, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})  # fmt: skip
    assert fill.returncode == 0 and fill.stderr == "", fill.stderr
    filled = _say(workdir, **env)["modules"]
    assert sorted(m for m in filled if m.split(".")[0] in CHECKERS) == []
