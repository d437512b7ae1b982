"""Cold start of the command line: `baton say --wait 'run hello hi'`, a new process each time.

    python -m bench.baton_cold --samples 7 --dir D

Each sample spawns the installed `baton` entry point (the same interpreter and venv), which
imports Baton, opens the SQLite store in D, loads `workflows/hello.yaml`, runs its one bash
step, prints the progress and the reply, and exits. Timed from the spawn to the exit (wall)
and by the child's CPU time (user + system; less sensitive to other load on the machine).
The first call, which creates the database, is not counted. Floors in the same rounds: the
interpreter alone (`python -c pass`) and the interpreter importing SQLAlchemy and pydantic
(what any Baton process needs to open its store and read its settings).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.protocol import ROOT, emit

FLOORS = {
    "interpreter": [sys.executable, "-c", "pass"],
    "sqlalchemy_pydantic": [sys.executable, "-c", "import sqlalchemy, pydantic"],
}


def _spawn(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """(wall s, child CPU s, stdout) of one run of `argv`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def baton_argv() -> list[str]:
    entry = Path(sys.executable).parent / "baton"
    base = [str(entry)] if entry.exists() else [sys.executable, "-c", "from bot.main import app; app()"]
    return [*base, "say", "--wait", "run hello hi"]


def measure(root: Path, samples: int) -> dict[str, object]:
    (root / "workflows").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "workflows" / "hello.yaml", root / "workflows" / "hello.yaml")
    env = {**os.environ, "BATON_DATABASE_URL": f"sqlite:///{root / 'baton.db'}",
           "BATON_WORKFLOW_DIRS": json.dumps([str(root / "workflows")])}  # fmt: skip
    for key in ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "DISCORD_TOKEN"):
        env.pop(key, None)
    say = baton_argv()
    _, _, out = _spawn(say, root, env)  # creates the database
    if "Hello from Baton: hi" not in out:
        raise SystemExit(f"unexpected reply: {out[-300:]}")
    walls: dict[str, list[float]] = {"say": [], **{k: [] for k in FLOORS}}
    cpus: dict[str, list[float]] = {k: [] for k in walls}
    for _ in range(samples):
        for side, argv in {"say": say, **FLOORS}.items():
            wall, cpu, out = _spawn(argv, root, env)
            if side == "say" and "Hello from Baton: hi" not in out:
                raise SystemExit(f"unexpected reply: {out[-300:]}")
            walls[side].append(wall)
            cpus[side].append(cpu)
    return {
        "samples": samples,
        **{f"{side}_wall_s": statistics.median(v) for side, v in walls.items()},
        **{f"{side}_min_wall_s": min(v) for side, v in walls.items()},
        **{f"{side}_cpu_s": statistics.median(v) for side, v in cpus.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--dir", required=True)
    opts = parser.parse_args()
    emit(measure(Path(opts.dir), opts.samples))


if __name__ == "__main__":
    main()
