"""The sandboxed tool runner as Baton starts it (`python -c BOOT`, the request on stdin): it
answers in JSON, imports asyncio only for an `async` tool, runs the tool's exit handlers and
ends without the interpreter's teardown (`core/exiting.py`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from core.engine.tool_runner import BOOT

ROOT = Path(__file__).resolve().parents[3]

TOOLS = '''
import atexit, sys
from core.engine.tools import tool

class Finalized:
    def __del__(self):
        sys.stderr.write("torn down\\n")

kept = Finalized()
atexit.register(lambda: sys.stderr.write("asyncio imported: %s\\n" % ("asyncio" in sys.modules)))

@tool(replay="pure")
def greet(who: str) -> str:
    return "hello " + who

@tool(replay="pure")
async def later(n: int) -> dict:
    return {"n": n}
'''


def _call(tmp_path: Path, tool: str, kwargs: dict[str, object]) -> tuple[dict[str, object], str]:
    (tmp_path / "runner_tools.py").write_text(TOOLS)
    request = {"paths": [str(ROOT), str(tmp_path)], "module": "runner_tools", "tool": tool, "kwargs": kwargs,
               "key": None}
    done = subprocess.run([sys.executable, "-c", BOOT], input=json.dumps(request), capture_output=True,
                          text=True, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def test_a_plain_tool_answers_without_importing_asyncio_and_its_exit_handler_runs(tmp_path: Path) -> None:
    answer, stderr = _call(tmp_path, "greet", {"who": "ana"})
    assert answer == {"text": "hello ana"}
    assert "asyncio imported: False" in stderr  # the tool's atexit handler ran, at the very end
    assert "torn down" not in stderr  # no teardown: the module's objects were never freed


def test_an_async_tool_still_runs_on_its_own_event_loop(tmp_path: Path) -> None:
    answer, stderr = _call(tmp_path, "later", {"n": 3})
    assert answer == {"json": '{"n":3}'}
    assert "asyncio imported: True" in stderr
