"""Run pages: page time by run size, live-update latency, memory of 100 open pages.

    .venv/bin/python -m bench.web_pages [--sizes 10,1000,5000] [--pages 100]

`make bench` runs it as its `web_pages` section.

Each figure is taken on the runtime `baton run` assembles (`build_baton`) with the pages
served by uvicorn on loopback, on a fresh SQLite database:
- page time: GET of a completed run's page (N pure tool steps), median of 5, through HTTP, and
  the CPU this process spent on it (server and client, all threads: the figure that holds
  when the machine is shared);
- live latency: a step finishes -> an open page's event stream delivers the change. "local"
  is a run executing in the serving process (its engine event wakes the page); "replica" is a
  change written by another process's store (the page sees it at its next poll);
- memory: the serving process's RSS with no page open, then with `--pages` event streams
  open on one run (each got its first update), measured in a child process that only serves.
Printed as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.protocol import emit
from bot.startup import started

TOOLS = Path(__file__).with_name("web_tools.py")
HOLD = """name: hold
nodes:
  - id: first
    bash: printf one
    replay: pure
  - id: second
    depends_on: [first]
    bash: read -r line < {fifo}; printf 'got %s' "$line"
    replay: pure
"""


def wide(n: int) -> str:
    lines = ["name: wide", "nodes:"]
    for i in range(n):
        lines.append(f"  - id: n{i}\n    tool: bench_ping")
        if i:
            lines.append(f"    depends_on: [n{(i - 1) // 2}]")
    return "\n".join(lines) + "\n"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def _site(root: Path, workflows: dict[str, str]) -> tuple[Any, Any, Any, int]:
    from bot.app import build_baton
    from bot.http import bind
    from bot.serve import serve_web as serve
    from bot.settings import load_settings

    (root / "workflows").mkdir(parents=True, exist_ok=True)
    for name, text in workflows.items():
        (root / "workflows" / f"{name}.yaml").write_text(text)
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    settings = load_settings(
        database_url=f"sqlite:///{root / 'baton.db'}", workflow_dirs=[root / "workflows"],
        overrides={"data_dir": root / ".baton", "web_port": port, "tool_modules": [str(TOOLS)],
                   "log_level": "WARNING",
                   # the pages, not the sandbox: each sandboxed tool step is a process of its own
                   # (5,000 of them took minutes here); its cost is the `real_steps` sandbox rows
                   "step_sandbox": "none"},
    )
    baton = build_baton(settings)
    return baton, settings, (serve, sock), port


async def _link(baton: Any, run_id: str) -> str:
    from adapters.console.messages import to_chat_message

    answer = await baton.handler.handle(to_chat_message(f"open {run_id}", "bench", "ana"))
    return str(answer[0].data["url"])


async def _start(baton: Any, text: str) -> str:
    from adapters.console.messages import to_chat_message

    answer = await baton.handler.handle(to_chat_message(text, "bench", "ana"))
    return str(answer[0].run_id)


async def page_times(sizes: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-web-") as tmp:
            baton, settings, (serve, sock), _ = await _site(Path(tmp), {"wide": wide(n)})
            async with baton.running(handle_signals=False):
                server = asyncio.create_task(serve(baton, settings, sock=sock))
                started(collect=True)  # as `baton run` does once serving: the start frozen out of GC
                run_id = await _start(baton, "run wide")
                await baton.engine.wait(run_id, timeout=600)
                url = await _link(baton, run_id)
                samples, cpu = [], []
                async with httpx.AsyncClient(timeout=60) as client:
                    await client.get(url)  # warm: templates compiled, workflow prepared
                    for _ in range(5):
                        began, began_cpu = time.perf_counter(), time.process_time()
                        response = await client.get(url)
                        samples.append(time.perf_counter() - began)
                        cpu.append(time.process_time() - began_cpu)
                        assert response.status_code == 200
                out[str(n)] = {"median_ms": round(statistics.median(samples) * 1000, 1),
                               "max_ms": round(max(samples) * 1000, 1), "bytes": len(response.content),
                               "cpu_median_ms": round(statistics.median(cpu) * 1000, 1)}
                baton.request_stop()
                await server
            baton.close()
    return out


async def _first_update_with(client: httpx.AsyncClient, url: str, wanted: str, ready: asyncio.Event) -> float:
    """Follow the page's event stream; the time an update carrying `wanted` arrived."""
    async with client.stream("GET", url + "/events") as stream:
        async for line in stream.aiter_lines():
            if line.startswith("data:"):
                ready.set()
                if wanted in line:
                    return time.perf_counter()
    raise AssertionError("stream ended")


async def latency(samples: int) -> dict[str, Any]:
    from core.store.port import Transition
    from core.store.records import RunStatus
    from core.store.repository import SqlStore

    local: list[float] = []
    replica: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-web-live-") as tmp:
        root = Path(tmp)
        import os

        fifo = root / "hold.fifo"
        os.mkfifo(fifo)
        baton, settings, (serve, sock), _ = await _site(root, {"hold": HOLD.format(fifo=fifo)})
        async with baton.running(handle_signals=False):
            server = asyncio.create_task(serve(baton, settings, sock=sock))
            async with httpx.AsyncClient(timeout=60) as client:
                for _ in range(samples):
                    run_id = await _start(baton, "run hold --force")
                    url = await _link(baton, run_id)
                    ready = asyncio.Event()
                    seen = asyncio.create_task(_first_update_with(client, url, '"second":["done"', ready))
                    await ready.wait()
                    await asyncio.to_thread(fifo.write_text, "go\n")  # opens once the step reads it
                    await baton.engine.wait(run_id, timeout=30)
                    done = max(e.finished_at or 0 for e in baton.store.steps.journal([run_id]))
                    arrived = await seen
                    local.append(arrived - time.perf_counter() + time.time() - done)
                # another replica's write: a gate approved by a second store on the same database
                other = SqlStore(settings.database_url)
                for _ in range(samples):
                    run_id = await _start(baton, "run hold --force")
                    url = await _link(baton, run_id)
                    ready = asyncio.Event()
                    seen = asyncio.create_task(_first_update_with(client, url, '"cancelled"', ready))
                    await ready.wait()
                    changed = time.perf_counter()
                    await asyncio.to_thread(other.runs.transition, Transition(run_id, RunStatus.CANCELLED,
                                                                              actor="bench"))
                    arrived = await seen
                    replica.append(arrived - changed)
                    await asyncio.to_thread(fifo.write_text, "go\n")
                    await baton.engine.wait(run_id, timeout=30)
                other.close()
            baton.request_stop()
            await server
        baton.close()
    return {
        "local_ms": {"median": round(statistics.median(local) * 1000, 1), "max": round(max(local) * 1000, 1)},
        "replica_ms": {"median": round(statistics.median(replica) * 1000, 1),
                       "max": round(max(replica) * 1000, 1), "poll_ms": settings.web_poll_ms},
        "samples": samples,
    }


def _serve_child(root: str, conn: Any) -> None:
    async def main() -> None:
        workflows = {"hold": HOLD.format(fifo=Path(root) / "f")}
        baton, settings, (serve, sock), _ = await _site(Path(root), workflows)
        async with baton.running(handle_signals=False):
            server = asyncio.create_task(serve(baton, settings, sock=sock))
            run_id = await _start(baton, "run hold")
            conn.send(await _link(baton, run_id))
            await asyncio.to_thread(conn.recv)
            baton.request_stop()
            await server
        baton.close()

    asyncio.run(main())


async def memory(pages: int) -> dict[str, Any]:
    import os

    with tempfile.TemporaryDirectory(prefix="bench-web-mem-") as tmp:
        os.mkfifo(Path(tmp) / "f")
        parent, child = multiprocessing.Pipe()
        proc = multiprocessing.get_context("spawn").Process(target=_serve_child, args=(tmp, child))
        proc.start()
        url = await asyncio.to_thread(parent.recv)
        async with httpx.AsyncClient(timeout=60) as client:
            await client.get(url)
            before = rss_kib(proc.pid or 0)
            readies = [asyncio.Event() for _ in range(pages)]
            streams = [asyncio.create_task(_first_update_with(client, url, "never-there", ready))
                       for ready in readies]
            await asyncio.gather(*(r.wait() for r in readies))
            after = rss_kib(proc.pid or 0)
            for task in streams:
                task.cancel()
            await asyncio.gather(*streams, return_exceptions=True)
        parent.send("stop")
        (Path(tmp) / "f").write_text("go\n")
        proc.join(30)
        if proc.is_alive():  # a server that did not stop must not hold this process at exit
            proc.terminate()  # (multiprocessing joins its children then: the section hung)
            proc.join(10)
    return {"rss_mib_no_page": round(before / 1024, 1), f"rss_mib_{pages}_pages": round(after / 1024, 1),
            "per_page_kib": round((after - before) / pages, 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,1000,5000")
    parser.add_argument("--pages", type=int, default=100,
                        help="event streams of the memory figure (0: no memory figure)")
    parser.add_argument("--samples", type=int, default=10)
    opts = parser.parse_args()

    async def run() -> dict[str, Any]:
        result = {
            "page_time": await page_times([int(s) for s in opts.sizes.split(",")]),
            "live_latency": await latency(opts.samples),
        }
        if opts.pages > 0:
            result["memory"] = await memory(opts.pages)
        return result

    result = asyncio.run(run())
    print(json.dumps(result, indent=2))
    emit(result)  # `make bench` (section `web_pages`) reads this line


if __name__ == "__main__":
    main()
