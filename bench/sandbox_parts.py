"""Where a sandboxed step's time goes: each part of the step sandbox started on its own.

    python -m bench.sandbox_parts --n 100 --rounds 3 --dir D

Each case runs `bash -c true` N times in a row (both pipes read, the exit awaited, as a
step's process is), rounds interleaved, medians reported; wall ms and CPU ms (this process
and its reaped children) per start. This process is the subreaper of what they leave, as
Baton is (`core/engine/nodes/reaper.py`): bwrap's init, which exits after bwrap itself, is
reaped here and its CPU (the step's, setpriv's) counted:

bare       `bash -c true`
setpriv    `setpriv --reuid … bash -c true` (when this runs as root: the step user's hop)
capsh      `capsh … --shell=bash -- -c true`: the same hop as a warmed sandbox's stub takes it
bwrap      bwrap with a step's mounts and namespaces, no setpriv (namespaces + mounts)
cold       bwrap + setpriv: a step's whole process, set up on its path (warming off)
warm       a warmed sandbox (`core/engine/warm.py`) already set up: from handing the step
           over (a line its dash stub reads and `exec`s) to its end (the step's path when it
           takes one); CPU counts the whole sandbox, set-up included
command    `Sandbox.command()` building the bwrap line in Python (µs per call)
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import resource
import statistics
import time
from pathlib import Path

from bench.protocol import emit
from bot.runtime import step_sandbox
from core.config import Settings
from core.engine import warm
from core.engine.nodes import reaper
from core.engine.sandbox import Sandbox

TRUE = ["bash", "-c", "true"]
PIPE = asyncio.subprocess.PIPE
MARKER = ("bench", "sandbox_parts", "1")


def cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def starts(argv: list[str], n: int, env: dict[str, str]) -> tuple[float, float]:
    spent, started = cpu_s(), time.perf_counter()
    for _ in range(n):
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=PIPE, stderr=PIPE, env=env, start_new_session=True
        )
        await proc.communicate()
        await reaper.sweep(MARKER)  # bwrap's init, once it has exited
        if proc.returncode != 0:
            raise SystemExit(f"{argv[:3]} exited {proc.returncode}")
    await asyncio.sleep(0.05)
    await reaper.sweep(MARKER)
    return (time.perf_counter() - started) * 1000 / n, (cpu_s() - spent) * 1000 / n


async def warmed(sandbox: Sandbox, where: warm.Layout, n: int, env: dict[str, str]) -> tuple[float, float]:
    """N warmed sandboxes set up first (and given time to be ready), then each handed a step."""
    pool = warm.WarmSandboxes(sandbox)
    spent = cpu_s()
    pool._fill(where, n)  # all of them ahead: the step's path alone is timed
    await asyncio.sleep(0.5 + n * 0.02)
    pool._fill = lambda *_: None  # type: ignore[method-assign]
    path = 0.0
    for _ in range(n):
        started = time.perf_counter()
        proc = await pool.take(where, TRUE, env, stdin=False)
        if proc is None:
            raise SystemExit("no warmed sandbox was ready")
        assert proc.stdin is not None
        proc.stdin.close()
        await proc.communicate()
        path += time.perf_counter() - started
        reaper.finished(proc.pid)
        await reaper.sweep(MARKER)
        if proc.returncode != 0:
            raise SystemExit(f"the warmed step exited {proc.returncode}")
    await pool.close()
    await asyncio.sleep(0.05)
    await reaper.sweep(MARKER)
    return path * 1000 / n, (cpu_s() - spent) * 1000 / n


async def measure(root: Path, n: int, rounds: int) -> dict[str, object]:
    reaper.adopt_orphans()
    work = root / "run"
    work.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    work.chmod(0o777)
    sandbox = step_sandbox(Settings(_env_file=None, data_dir=root / "data", step_sandbox="bwrap"))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
    cold = sandbox.command(TRUE, workdir=work, workflow_dir=root, own_session=True)
    cut = cold.index("--", cold.index("--chdir"))
    as_root = cold[:cut]  # no setpriv, no capability options
    if "--cap-drop" in as_root:
        as_root = as_root[: as_root.index("--cap-drop")]
    cases: dict[str, list[str]] = {"bare": TRUE, "bwrap": [*as_root, "--", *TRUE], "cold": cold}
    if sandbox.user is not None:
        cases["setpriv"] = cold[cut + 1 :]
    if sandbox.capsh is not None:  # the warmed stub's drop: `capsh … --shell=bash -- -c true`
        boxed = dataclasses.replace(sandbox, shell="/usr/bin/bash")
        line = boxed.command(["/usr/bin/bash", "-c", "true"], workdir=work, own_session=True)
        cases["capsh"] = line[line.index(sandbox.capsh) :]
    where = warm.layout(work, root, True, None, ())
    started = time.perf_counter()
    for _ in range(200):
        sandbox.command(TRUE, workdir=work, workflow_dir=root, own_session=True)
    command_us = (time.perf_counter() - started) * 1e6 / 200
    for argv in cases.values():  # warm-up
        await starts(argv, 3, env)
    samples: dict[str, list[tuple[float, float]]] = {k: [] for k in [*cases, "warm"]}
    for _ in range(rounds):
        for name, argv in cases.items():
            samples[name].append(await starts(argv, n, env))
        samples["warm"].append(await warmed(sandbox, where, n, env))
    out: dict[str, object] = {"n": n, "rounds": rounds, "command_us": command_us}
    bare = statistics.median(s[0] for s in samples["bare"])
    for name, got in samples.items():
        wall = statistics.median(s[0] for s in got)
        out[name] = {"ms": wall, "cpu_ms": statistics.median(s[1] for s in got), "x_bare": wall / bare}
    out["load"] = list(os.getloadavg())
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", required=True)
    opts = parser.parse_args()
    emit(asyncio.run(measure(Path(opts.dir), opts.n, opts.rounds)))


if __name__ == "__main__":
    main()
