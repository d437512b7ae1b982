"""Figures of the trust boundary's limits, measured side by side in one run:

    python -m bench.trust_limits

- catalog load with a billion-laughs file present (first load, then reloads);
- command latency in one conversation while another renders a pathological template;
- peak memory of `baton say` running a step that prints 50 MB;
- the cost of sweeping a step's leftover processes: a bash step with and without the sweep,
  beside a bare `asyncio.create_subprocess_exec` of the same command.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bot.app import build_baton
from core.commands.messages import ChatMessage
from core.config import Settings
from core.engine.nodes import NodeContext, process, reaper
from core.engine.step_env import StepEnvironment
from core.redaction import Redactor
from core.workflows.catalog import Catalog

ROOT = Path(__file__).resolve().parents[1]
NESTED = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"


def laughs(levels: int = 9) -> str:
    lines = ["name: laughs", 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(levels - 1):
        lines.append(f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]")
    lines.append(f"nodes: [{{id: x, bash: echo *{chr(96 + levels)}}}]")
    return "\n".join(lines) + "\n"


def catalog_load(tmp: Path) -> str:
    (tmp / "laughs.yaml").write_text(laughs())
    (tmp / "ok.yaml").write_text("name: ok\nnodes: [{id: a, bash: 'true'}]\n")
    started = time.perf_counter()
    catalog = Catalog([tmp])
    first = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(100):
        catalog.reload()
    again = (time.perf_counter() - started) / 100
    return (
        f"catalog with billion laughs: first load {first * 1e3:.1f} ms, "
        f"reload {again * 1e6:.0f} µs, parses {catalog.parses}"
    )


async def latency(tmp: Path) -> str:
    (tmp / "wf").mkdir()
    (tmp / "wf" / "nested.yaml").write_text(f'name: nested\nnodes:\n  - id: p\n    prompt: "{NESTED}"\n')
    settings = Settings(
        database_url=f"sqlite:///{tmp}/b.db", workflow_dirs=[tmp / "wf"], data_dir=tmp / "d", tool_modules=[]
    )
    baton = build_baton(settings)
    try:
        async with baton.running(grace=1.0, handle_signals=False):
            idle = [await _timed(baton, f"i{n}") for n in range(30)]
            start = ChatMessage("console", "A", "console:ana", "run nested", "run")
            (run,) = [r for r in await baton.handler.handle(start) if r.run_id]
            busy: list[float] = []
            while baton.store.runs.get_run(run.run_id).status == "running":
                busy.append(await _timed(baton, f"b{len(busy)}"))
                await asyncio.sleep(0)  # what an adapter does between two messages
            done = await baton.engine.wait(run.run_id, timeout=60)
    finally:
        baton.close()
    return (
        f"command latency: idle median {statistics.median(idle) * 1e3:.1f} ms; while another conversation "
        f"renders {len(busy)} answers, median {statistics.median(busy) * 1e3:.1f} ms, "
        f"max {max(busy) * 1e3:.1f} ms; that run {done.status}"
    )


async def _timed(baton: object, event: str) -> float:
    started = time.perf_counter()
    await baton.handler.handle(ChatMessage("console", "B", "console:bo", "runs", event))  # type: ignore[attr-defined]
    return time.perf_counter() - started


def big_output(tmp: Path) -> str:
    (tmp / "workflows").mkdir()
    (tmp / "workflows" / "big.yaml").write_text(
        "name: big\nnodes:\n  - id: flood\n    bash: head -c 50000000 /dev/zero | tr '\\\\0' x\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_")}
    env.update(
        BATON_DATABASE_URL=f"sqlite:///{tmp}/b.db",
        BATON_WORKFLOW_DIRS=str(tmp / "workflows"),
        BATON_DATA_DIR=str(tmp / ".baton"),
        BATON_LOG_LEVEL="WARNING",
        PYTHONPATH=str(ROOT),
    )
    argv = [sys.executable, "-m", "bot.main", "say", "--json", "--wait", "--user", "ana", "--", "run big"]
    proc = subprocess.Popen(argv, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    return f"50 MB output step: peak memory of `baton say` {usage.ru_maxrss // 1024} MB"


async def reaping(tmp: Path, rounds: int = 20, each: int = 15) -> str:
    environment = StepEnvironment.from_environ(dict(os.environ), redactor=Redactor([]))
    ctx = NodeContext(
        run_id="r",
        node_id="n",
        workdir=tmp,
        artifacts_dir=tmp,
        idempotency_key=None,
        timeout=10,
        environment=environment,
    )
    real = reaper.sweep

    async def no_sweep(marker: reaper.Marker) -> int:
        return 0

    times: dict[str, list[float]] = {"bare": [], "with sweep": [], "without sweep": []}
    for _ in range(rounds):
        for name in times:
            reaper.sweep = real if name == "with sweep" else no_sweep  # type: ignore[assignment]
            for _ in range(each):
                started = time.perf_counter()
                if name == "bare":
                    proc = await asyncio.create_subprocess_exec(
                        "bash",
                        "-c",
                        "true",
                        stdout=asyncio.subprocess.PIPE,
                        stderr=asyncio.subprocess.PIPE,
                        start_new_session=True,
                    )
                    await proc.communicate()
                else:
                    await process.run_process(["bash", "-c", "true"], ctx)
                times[name].append(time.perf_counter() - started)
    reaper.sweep = real  # type: ignore[assignment]
    medians = {name: statistics.median(values) for name, values in times.items()}
    return "bash step: " + ", ".join(
        f"{name} {value * 1e3:.2f} ms ({value / medians['bare']:.2f}x bare)"
        for name, value in medians.items()
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        print(catalog_load(Path(a)))
        print(asyncio.run(latency(Path(b))))
    with tempfile.TemporaryDirectory() as c:
        print(big_output(Path(c)))
    with tempfile.TemporaryDirectory() as d:
        print(asyncio.run(reaping(Path(d))))


if __name__ == "__main__":
    main()
