"""Real steps against the bare cost of starting the same process.

    python -m bench.baton_real_steps --n 200 --rounds 3 --dir D [--kinds bash,script]

bash   a chain of N `bash: "true"` steps (default replay class: unsafe, so each step's
       `started` entry is durable before it runs) vs N sequential bare
       `asyncio.create_subprocess_exec("bash", "-c", "true")` with both pipes read and the
       exit awaited: the floor any runner of that command pays.
script a chain of N `script:` steps (`pass`, inputs as JSON on stdin) vs N bare
       `python -c pass` starts of the same interpreter, stdin fed the same way.
Each again in the step sandbox (bubblewrap, as `baton run` sets it up: `bash_sandbox`,
`script_sandbox`), against the same bare start: what the sandbox costs a step. Those steps
take the sandboxes warmed for their run (`core/engine/warm.py`); `*_sandbox_cold` is the
same sandbox with warming off (every step sets its bwrap up on its own path).
Rounds are interleaved (bare, Baton, bare, Baton, …) in one process; medians are reported.
CPU per step (`*_cpu_ms`): this process and its reaped children (user + system), so a
sandboxed step counts bwrap, setpriv, the stub and the warmed sandboxes a run never used
(killed at its end); the machine's load average at the end is in `load`. On a machine whose
cores are busy, wall time follows CPU: a sandboxed step's bwrap (~4 ms of CPU) and setpriv
(~1 ms) are then paid on the chain's time whether warmed or not. `--kinds bash` runs the
bash chains alone.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import resource
import statistics
import sys
import time
from pathlib import Path

from bench.protocol import emit
from bench.rig import rig
from bot.runtime import step_sandbox
from core.config import Settings

SCRIPT = "pass"


def chain_yaml(name: str, n: int, body: str) -> str:
    lines = [f"name: {name}", "nodes:"]
    for i in range(n):
        lines.append(f"  - id: s{i:04d}")
        if i:
            lines.append(f"    depends_on: [s{i - 1:04d}]")
        lines.append(f"    {body}")
    return "\n".join(lines) + "\n"


def cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def bare(argv: list[str], n: int, stdin: bytes | None) -> float:
    pipe = asyncio.subprocess.PIPE
    started = time.perf_counter()
    for _ in range(n):
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=pipe if stdin is not None else asyncio.subprocess.DEVNULL, stdout=pipe, stderr=pipe
        )
        await proc.communicate(stdin)
        if proc.returncode != 0:
            raise SystemExit(f"{argv} exited {proc.returncode}")
    return (time.perf_counter() - started) * 1000 / n


class WarmCounts(logging.Handler):
    """Steps that took a warmed sandbox and steps that started cold, from each run's closing
    line (`core/engine/warm.py`)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.taken = self.cold = 0

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.msg, str) and record.msg.startswith("warmed sandboxes:"):
            taken, cold = record.args if isinstance(record.args, tuple) else (0, 0)
            self.taken += int(taken)  # type: ignore[call-overload]
            self.cold += int(cold)  # type: ignore[call-overload]


async def measure(
    root: Path, n: int, rounds: int, only: tuple[str, ...] = ("bash", "script")
) -> dict[str, object]:
    kinds = {
        "bash": (["bash", "-c", "true"], None, 'bash: "true"'),
        "script": ([sys.executable, "-c", SCRIPT], b"{}", f"script: {SCRIPT}"),
    }
    kinds = {k: v for k, v in kinds.items() if k in only}
    sides = ("", "_sandbox", "_sandbox_cold")
    fields = ("bare", "baton", "bare_cpu", "baton_cpu", "warm_taken", "warm_cold")
    samples: dict[str, dict[str, list[float]]] = {
        k + side: {f: [] for f in fields} for k in kinds for side in sides
    }
    counts = WarmCounts()
    warm_log = logging.getLogger("baton.sandbox")  # `core/engine/warm.py`'s logger
    warm_log.addHandler(counts)
    warm_log.setLevel(logging.DEBUG)
    settings = Settings(_env_file=None, data_dir=root / "sandboxed" / "data", step_sandbox="bwrap")
    sandbox = step_sandbox(settings)
    cold = dataclasses.replace(sandbox, shell=None)  # `can_warm` False: every step starts cold
    async with (
        rig(root / "plain") as plain,
        rig(root / "sandboxed", sandbox=sandbox) as boxed,
        rig(root / "cold", sandbox=cold) as boxed_cold,
    ):
        rigs = {"": plain, "_sandbox": boxed, "_sandbox_cold": boxed_cold}
        for r in rigs.values():
            for kind, (_, _, body) in kinds.items():
                r.add_workflow(f"real_{kind}", chain_yaml(f"real_{kind}", n, body))
        for kind, (argv, stdin, _) in kinds.items():  # warm-up: imports, first spawn, catalog
            await bare(argv, 3, stdin)
            for r in rigs.values():
                await r.run(f"real_{kind}")
        for _ in range(rounds):
            for kind, (argv, stdin, _) in kinds.items():
                for side, r in rigs.items():
                    sample = samples[kind + side]
                    counts.taken = counts.cold = 0
                    spent = cpu_s()
                    sample["bare"].append(await bare(argv, n, stdin))
                    sample["bare_cpu"].append((cpu_s() - spent) * 1000 / n)
                    started, spent = time.perf_counter(), cpu_s()
                    run_id = await r.run(f"real_{kind}")
                    sample["baton_cpu"].append((cpu_s() - spent) * 1000 / n)
                    per_step = (time.perf_counter() - started) * 1000 / n
                    status = r.store.runs.get_run(run_id).status.value
                    if status != "completed":
                        raise SystemExit(f"the {kind}{side} chain ended {status}")
                    sample["baton"].append(per_step)
                    sample["warm_taken"].append(counts.taken)
                    sample["warm_cold"].append(counts.cold)
    out: dict[str, object] = {"n": n, "rounds": rounds, "load": list(os.getloadavg())}
    for kind, got in samples.items():
        bare_ms, baton_ms = statistics.median(got["bare"]), statistics.median(got["baton"])
        ratios = [b / a for a, b in zip(got["bare"], got["baton"], strict=True)]
        out[kind] = {
            "bare_ms": bare_ms,
            "baton_ms": baton_ms,
            "ratio": statistics.median(ratios),
            "ratios": ratios,
            "bare_cpu_ms": statistics.median(got["bare_cpu"]),
            "baton_cpu_ms": statistics.median(got["baton_cpu"]),
            "warm_taken": got["warm_taken"],  # per round: steps that took a warmed sandbox
            "warm_cold": got["warm_cold"],  # and steps of a warming run that started cold
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--kinds", default="bash,script", help="which chains (comma-separated): bash, script")
    opts = parser.parse_args()
    emit(asyncio.run(measure(Path(opts.dir), opts.n, opts.rounds, tuple(opts.kinds.split(",")))))


if __name__ == "__main__":
    main()
