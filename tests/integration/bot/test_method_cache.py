"""Dataclass methods compiled once and kept beside the bytecode (bot/method_cache.py).

Real interpreters, one after the other, as `baton` starts them (`bot.startup.prepare`), with
their bytecode cache in a directory of the test's (`PYTHONPYCACHEPREFIX`): the first writes
the compiled methods, the next executes them from the file instead of compiling; the classes
behave exactly as without the cache (repr, equality, hashing, frozen, slots, defaults, the
annotations of `__init__`), and a damaged file or `PYTHONDONTWRITEBYTECODE` only costs the
compiles.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = """
import dataclasses, json, sys
from bot import method_cache, startup
if sys.argv[1] == "cached":
    startup.prepare()
compiled = []
def seen(event, args):  # the interpreter's audit events: compiles of dataclass methods
    if event == "compile" and "__create_fn__" in str(args[0]):
        compiled.append(args[1])
sys.addaudithook(seen)

@dataclasses.dataclass(frozen=True, slots=True, order=True)
class Point:
    x: int
    y: int = 0
    tags: tuple[str, ...] = dataclasses.field(default_factory=tuple)

@dataclasses.dataclass(kw_only=True)
class Job:
    name: str
    point: Point | None = None

p, q = Point(1, tags=("a",)), Point(1, tags=("a",))
try:
    p.x = 2
    frozen = False
except dataclasses.FrozenInstanceError:
    frozen = True
job = Job(name="j", point=p)
job.name = "k"
startup.started()
print(json.dumps({
    "repr": [repr(p), repr(job)], "eq": p == q, "lt": Point(0) < p, "hash": hash(p) == hash(q),
    "frozen": frozen, "slots": hasattr(p, "__dict__"), "defaults": Point(3).tags,
    "init": str(Point.__init__.__annotations__) + str(Job.__init__.__annotations__),
    "compiled": len(compiled), "path": method_cache.cache_path(),
}))
"""


def _run(tmp_path: Path, mode: str, **env_extra: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env.update(PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=str(tmp_path / "pycache"), **env_extra)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def _behaviour(result: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in result.items() if k not in ("compiled", "path")}


def test_the_second_process_runs_the_compiled_methods_from_the_file_and_they_behave_the_same(
    tmp_path: Path,
) -> None:
    plain = _run(tmp_path, "plain")
    first = _run(tmp_path, "cached")
    second = _run(tmp_path, "cached")
    path = Path(str(first["path"]))
    assert path.is_file() and path.is_relative_to(tmp_path / "pycache")  # beside the bytecode
    assert plain["compiled"] != 0 and first["compiled"] != 0  # new source texts: compiled, then saved
    assert second["compiled"] == 0  # all of them came from the file
    assert _behaviour(plain) == _behaviour(first) == _behaviour(second)
    assert plain["eq"] is plain["hash"] is plain["frozen"] is plain["lt"] is True
    assert plain["slots"] is False and plain["defaults"] == []
    assert "int" in str(plain["init"])  # the annotations are the types, not strings


def test_a_damaged_file_is_compiled_over_and_no_file_without_bytecode_writing(tmp_path: Path) -> None:
    first = _run(tmp_path, "cached", PYTHONDONTWRITEBYTECODE="1")
    path = Path(str(first["path"]))
    assert not path.exists()  # as no .pyc is written either
    path.parent.mkdir(parents=True)
    path.write_bytes(importlib.util.MAGIC_NUMBER + b"{\xff not marshal data")  # right header, bad body
    damaged = _run(tmp_path, "cached")
    assert damaged["compiled"] != 0
    assert _behaviour(damaged) == _behaviour(first)
    assert _run(tmp_path, "cached")["compiled"] == 0  # rewritten whole by the process before
