"""A Baton replica or worker in a child process, driven by the scale and fault tests.

    python -m tests.integration.scale.node '<json options>'

`{"role": "replica", ...}` builds the real application (`bot.app.build_baton`) and enters
`baton.running()` (recovery, heartbeat, SIGTERM handling, graceful stop), prints
`{"ready": <lease owner>}` and then serves JSON commands, one per stdin line, answering
each with one stdout line carrying the same `id`:

    {"id": 1, "op": "start", "workflow": "w", "args": {...}}  -> {"id": 1, "run": "<run id>"}
    {"id": 2, "op": "wait", "run": "<id>", "timeout": 30}    -> {"id": 2, "status": "completed"}
    {"id": 3, "op": "say", "text": "run w hi", "event": "Ev1", "conversation": "c", "user": "u"}
                                                             -> {"id": 3, "replies": [[kind, run_id], ...]}
    {"id": 4, "op": "resume", "run": "<id>"}                 -> {"id": 4, "won": true}
                                                                | {"id": 4, "lost": "RunNotResumable"}

Commands run concurrently; stdin closing or SIGTERM ends the process (gracefully).
`"pause_handoff": true` blocks the first hand-off to the queue between its two writes
(after printing `{"handoff": <entry id>}`), for the test that kills the process there.

`{"role": "worker", ...}` runs `bot.worker.serve_worker` and prints `{"ready": <name>}`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from bot.app import Baton, build_baton
from bot.logging import setup_logging
from bot.worker import serve_worker
from core.commands.messages import ChatMessage
from core.config import Settings
from core.errors import BatonError
from core.redaction import Redactor


def say(value: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def settings_from(options: dict[str, Any]) -> Settings:
    root = Path(options["root"])
    name = options.get("name", options["role"])
    return Settings(
        database_url=options["url"],
        workflow_dirs=[root / "workflows"],
        data_dir=root / "data" / name,
        tool_modules=[],
        replica_id=options.get("replica", "replica"),
        lease_seconds=float(options.get("lease", 15.0)),
        executor=options.get("executor", "local"),
        shutdown_grace=float(options.get("grace", 5.0)),
        worker_heartbeat_seconds=float(options.get("heartbeat", 0.3)),
        log_level=options.get("log_level", "WARNING"),
        step_sandbox=options.get("sandbox", "none"),  # the steps write files the tests read
    )


def _pause_first_handoff(baton: Baton) -> None:
    dispatcher = baton.dispatcher
    assert dispatcher is not None, "pause_handoff needs executor=procrastinate"
    paused = threading.Event()

    def hold(entry_id: int) -> None:
        if not paused.is_set():
            paused.set()
            say({"handoff": entry_id})
            threading.Event().wait()  # inside the transaction, until the test kills us

    dispatcher.between_writes = hold


async def _command(baton: Baton, request: dict[str, Any]) -> dict[str, Any]:
    op, engine = request["op"], baton.engine
    if op == "start":
        run = await engine.start_run(
            workflow=request["workflow"],
            args=request.get("args", {}),
            platform="console",
            conversation=request.get("conversation", "scale"),
            thread=None,
            requester="console:test",
        )
        return {"run": run.id}
    if op == "wait":
        run = await engine.wait(request["run"], timeout=float(request.get("timeout", 60)))
        return {"status": run.status.value, "reason": run.reason}
    if op == "say":
        message = ChatMessage(
            platform="console",
            conversation=request.get("conversation", "scale"),
            user=request.get("user", "console:test"),
            text=request["text"],
            event_id=request["event"],
            direct=True,
        )
        replies = await baton.handler.handle(message)
        return {"replies": [[r.kind, r.run_id] for r in replies]}
    if op == "resume":
        try:
            await engine.resume(request["run"], actor=request.get("actor", f"console:{os.getpid()}"))
        except BatonError as exc:
            return {"lost": type(exc).__name__, "by": getattr(exc, "by", None)}
        return {"won": True}
    raise ValueError(f"unknown op {op}")


async def _answer(baton: Baton, request: dict[str, Any]) -> None:
    try:
        answer = await _command(baton, request)
    except (BatonError, TimeoutError) as exc:
        answer = {"error": f"{type(exc).__name__}: {exc}"}
    say({"id": request["id"], **answer})


async def replica(options: dict[str, Any]) -> None:
    baton = build_baton(settings_from(options))
    if options.get("pause_handoff"):
        _pause_first_handoff(baton)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    pending: set[asyncio.Task[None]] = set()
    try:
        async with baton.running():
            say({"ready": baton.engine.owner})
            stop = asyncio.create_task(baton.stopping.wait())
            while True:
                line_task = asyncio.create_task(reader.readline())
                await asyncio.wait({line_task, stop}, return_when=asyncio.FIRST_COMPLETED)
                if stop.done():
                    line_task.cancel()
                    break
                line = line_task.result()
                if not line:
                    break
                task = asyncio.create_task(_answer(baton, json.loads(line)))
                pending.add(task)
                task.add_done_callback(pending.discard)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
    finally:
        baton.close()


async def worker(options: dict[str, Any]) -> None:
    name = options.get("name", f"worker-{os.getpid()}")
    await serve_worker(settings_from(options), name=name, on_ready=lambda: say({"ready": name}))


def main() -> None:
    options = json.loads(sys.argv[1])
    setup_logging(options.get("log_level", "WARNING"), Redactor(()))
    asyncio.run(replica(options) if options["role"] == "replica" else worker(options))


if __name__ == "__main__":
    main()
