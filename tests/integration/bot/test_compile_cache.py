"""Code Python generates while modules load, compiled once and kept beside the bytecode
(bot/compile_cache.py).

Real interpreters, one after the other, as `baton` starts them (`bot.startup.prepare`), with
their bytecode cache in a directory of the test's (`PYTHONPYCACHEPREFIX`): the first compiles
and writes, the next takes dataclass methods, string annotations, namedtuples and regular
expressions from the file instead of compiling them; all of them behave exactly as without
the cache, and a damaged file or `PYTHONDONTWRITEBYTECODE` only costs the compiles.
"""

from __future__ import annotations

import _sre
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = """
import sys
from bot import compile_cache, startup
if sys.argv[1] == "cached":
    startup.prepare()
import collections, dataclasses, json, re, typing

compiled, parsed = [], []
def seen(event, args):  # the interpreter's audit events: compiles of generated code
    if event == "compile" and args[1] == "<string>":
        compiled.append(args[0])
sys.addaudithook(seen)
real_parse = re._compiler._parser.parse
def parse(*args):  # the regular expression parser (in Python) runs only on a miss
    parsed.append(args[0])
    return real_parse(*args)
re._compiler._parser.parse = parse

@dataclasses.dataclass(frozen=True, slots=True, order=True)
class Point:
    x: int
    y: int = 0
    tags: tuple[str, ...] = dataclasses.field(default_factory=tuple)

@dataclasses.dataclass(kw_only=True)
class Job:
    name: str
    point: "Point | None" = None

Pair = collections.namedtuple("Pair", "left right", defaults=[0])
p, q = Point(1, tags=("a",)), Point(1, tags=("a",))
try:
    p.x = 2
    frozen = False
except dataclasses.FrozenInstanceError:
    frozen = True
job = Job(name="j", point=p)
job.name = "k"
word = re.compile(r"(?P<key>[a-z_]+)\\s*=\\s*(?P<value>\\d+)(?:\\s*#.*)?$", re.M | re.I)
match = word.search("x\\nLimit = 30 # max")
hints = typing.get_type_hints(Job)  # compiles the string annotation
startup.started()
print(json.dumps({
    "repr": [repr(p), repr(job), repr(Pair(1))], "eq": p == q, "lt": Point(0) < p,
    "hash": hash(p) == hash(q), "frozen": frozen, "slots": hasattr(p, "__dict__"),
    "defaults": Point(3).tags, "pair": Pair(2, 3) + Pair(left=4),
    "init": str(Point.__init__.__annotations__) + str(Job.__init__.__annotations__),
    "hints": str(hints),
    "re": [word.flags, word.groups, dict(word.groupindex), match.groupdict(), match.span()],
    "compiled": len(compiled), "parsed": len(parsed), "path": compile_cache.cache_path(),
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
    return {k: v for k, v in result.items() if k not in ("compiled", "parsed", "path")}


def test_the_next_process_takes_the_generated_code_from_the_file_and_it_behaves_the_same(
    tmp_path: Path,
) -> None:
    plain = _run(tmp_path, "plain")
    first = _run(tmp_path, "cached")
    second = _run(tmp_path, "cached")
    path = Path(str(first["path"]))
    assert path.is_file() and path.is_relative_to(tmp_path / "pycache")  # beside the bytecode
    # methods, the string annotation, the namedtuple and the pattern: compiled, then saved
    assert plain["compiled"] != 0 and first["compiled"] != 0 and first["parsed"] != 0
    assert second["compiled"] == 0 and second["parsed"] == 0  # all of them came from the file
    assert _behaviour(plain) == _behaviour(first) == _behaviour(second)
    assert plain["eq"] is plain["hash"] is plain["frozen"] is plain["lt"] is True
    assert plain["slots"] is False and plain["defaults"] == [] and plain["pair"] == [2, 3, 4, 0]
    assert "int" in str(plain["init"])  # the annotations are the types, not strings
    assert plain["re"] == [2 | 8 | 32, 2, {"key": 1, "value": 2}, {"key": "Limit", "value": "30"}, [2, 18]]


def test_a_damaged_file_is_compiled_over_and_no_file_without_bytecode_writing(tmp_path: Path) -> None:
    first = _run(tmp_path, "cached", PYTHONDONTWRITEBYTECODE="1")
    path = Path(str(first["path"]))
    assert not path.exists()  # as no .pyc is written either
    path.parent.mkdir(parents=True)
    header = importlib.util.MAGIC_NUMBER + _sre.MAGIC.to_bytes(4, "little")
    path.write_bytes(header + b"{\xff not marshal data")  # the right header, a bad body
    damaged = _run(tmp_path, "cached")
    assert damaged["compiled"] != 0 and damaged["parsed"] != 0
    assert _behaviour(damaged) == _behaviour(first)
    assert _run(tmp_path, "cached")["compiled"] == 0  # rewritten whole by the process before


STARTING = """
import json, sys
from bot.startup import prepare
prepare()
compiled = []
def seen(event, args):  # the compiles of dataclass methods
    if event == "compile" and b"__create_fn__" in (args[0] if isinstance(args[0], bytes) else b""):
        compiled.append(args[0])
sys.addaudithook(seen)
import bot.serve, bot.worker  # the way of `baton say`, `run` and `worker` to work
print(json.dumps({"compiled": len(compiled)}))
"""


def test_an_install_fills_the_cache_once_for_processes_that_cannot_write_it(tmp_path: Path) -> None:
    """`python -m bot.compile_cache` (docs/operations.md) writes even where processes write no
    bytecode; a start then compiles no dataclass method."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    env.update(PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=str(tmp_path / "pycache"))
    env["PYTHONDONTWRITEBYTECODE"] = "1"

    def run(*args: str) -> str:
        proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=120, check=False)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    cold = json.loads(run("-c", STARTING))
    path = Path(run("-m", "bot.compile_cache").strip())
    assert path.is_file() and path.is_relative_to(tmp_path / "pycache")
    primed = json.loads(run("-c", STARTING))
    assert cold["compiled"] > 500 and primed["compiled"] == 0  # ≈ 1,200 on the way to work


SQLALCHEMY = """
import json, sys
if sys.argv[1] == "cached":
    from bot.startup import prepare
    prepare()
compiled = []
def seen(event, args):  # compiles of the wrappers SQLAlchemy's decorators generate
    if event == "compile" and str(args[1]).startswith("<sqlalchemy generated"):
        compiled.append(args[1])
sys.addaudithook(seen)
import sqlalchemy as sa
from sqlalchemy.sql.selectable import Select
t = sa.table("t", sa.column("a"), sa.column("b"))
query = sa.select(t.c.a).where(t.c.b == 1).order_by(t.c.a).limit(3)  # generated `_generative` wrappers
wrapper = Select.limit.__code__
print(json.dumps({
    "sql": str(query), "params": query.compile().params, "compiled": len(compiled),
    "wrapper": [wrapper.co_filename, wrapper.co_flags, wrapper.co_varnames, wrapper.co_code.hex()],
}))
"""


def _run_script(script: str, mode: str, tmp_path: Path) -> dict[str, object]:
    """`script` (`plain` or `cached`) in a new interpreter with its own bytecode cache under
    `tmp_path`: the JSON it prints."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env.update(PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=str(tmp_path / "pycache"))
    proc = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def test_sqlalchemy_s_generated_wrappers_come_from_the_file_and_are_the_same_code(tmp_path: Path) -> None:
    """The ≈ 100 wrappers `import sqlalchemy` writes and compiles: the same code (file name,
    `__future__` flags, bytecode) whether compiled by SQLAlchemy or taken from the file."""
    plain, first, second = (_run_script(SQLALCHEMY, mode, tmp_path) for mode in ("plain", "cached", "cached"))
    assert int(str(plain["compiled"])) > 50 and int(str(first["compiled"])) > 50
    assert second["compiled"] == 0  # every wrapper came from the file
    same = {k: v for k, v in plain.items() if k != "compiled"}
    assert same == {k: v for k, v in second.items() if k != "compiled"}
    assert "LIMIT" in str(plain["sql"]) and plain["params"] == {"b_1": 1, "param_1": 3}
    assert str(plain["wrapper"][0]).startswith("<sqlalchemy generated")  # type: ignore[index]


JINJA2 = """
import json, sys
if sys.argv[1] == "cached":
    from bot.startup import prepare
    prepare()
compiled = []
def seen(event, args):  # compiles of the Python code jinja2 generates for a template
    if event == "compile" and args[1] == "<template>":
        compiled.append(args[1])
sys.addaudithook(seen)
from core.workflows.bash_template import render_bash
from core.workflows.templating import environment
template = environment().from_string("{% for x in items %}{{ x | upper }}-{% endfor %}{{ who }}")
code = template.root_render_func.__code__
inputs = {"inputs": {"message": "hi", "n": "7"}}
command = render_bash("echo {{ inputs.message }} {{ inputs.n | int }}", inputs)
print(json.dumps({
    "text": template.render(items=["a", "b"], who="me"), "compiled": len(compiled),
    "bash": [command.text, dict(command.variables)],
    "code": [code.co_filename, code.co_flags, code.co_varnames, code.co_code.hex()],
}))
"""


def test_jinja2_s_template_code_comes_from_the_file_and_is_the_same_code(tmp_path: Path) -> None:
    """The Python code jinja2 generates for a template made from a string (the workflows'
    templates): the same code (file name, flags, bytecode) whether compiled or from the file."""
    plain, first, second = (_run_script(JINJA2, mode, tmp_path) for mode in ("plain", "cached", "cached"))
    assert plain["compiled"] == first["compiled"] == 2  # the template and the bash command's
    assert second["compiled"] == 0  # both came from the file
    same = {k: v for k, v in plain.items() if k != "compiled"}
    assert same == {k: v for k, v in first.items() if k != "compiled"}
    assert same == {k: v for k, v in second.items() if k != "compiled"}
    assert plain["text"] == "A-B-me" and plain["bash"] == [
        'echo "$BATON_ARG_1" "$BATON_ARG_2"', {"BATON_ARG_1": "hi", "BATON_ARG_2": "7"}]
