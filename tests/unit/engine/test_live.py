"""Live runs (`core.engine.live`): one watcher per run whatever the listeners, a read only when
the pulse moved, a poke that wakes it at once, and the changes a listener has not got."""

from __future__ import annotations

import asyncio
from typing import Any

from core.engine.live import LiveHub, Snapshot, changes


def state(rev: int, nodes: dict[str, list[Any]]) -> Snapshot:
    return {"rev": ["running", rev, ""], "status": "running", "counts": {}, "nodes": nodes}


async def test_one_watcher_reads_only_when_the_pulse_moves_and_a_poke_wakes_it() -> None:
    pulse = {"r1": (1,)}
    reads: list[str] = []

    def read(run_id: str) -> Snapshot:
        reads.append(run_id)
        return state(pulse[run_id][0], {"a": ["running", 0.0, "running", ""]})

    hub = LiveHub(pulse=pulse.get, read=read, poll=60.0, min_gap=0.0, heartbeat=60.0)
    first, second = hub.updates("r1"), hub.updates("r1")
    a = await asyncio.wait_for(anext(first), 5)
    b = await asyncio.wait_for(anext(second), 5)
    assert a == b and a is not None and a["rev"][1] == 1
    assert hub.watching == 1 and reads == ["r1"]  # two listeners, one watcher, one read
    pulse["r1"] = (2,)
    hub.poke("r1")  # without it the next look would be a minute away
    moved = await asyncio.wait_for(anext(first), 5)
    assert moved is not None and moved["rev"][1] == 2 and reads == ["r1", "r1"]
    await first.aclose()
    await second.aclose()
    assert hub.watching == 0
    await hub.close()


def test_changes_carry_only_what_the_listener_lacks() -> None:
    one = state(1, {"a": ["done", 1.0, "ran", ""], "b": ["running", 0.0, "running", ""]})
    assert changes(one, {}, None) == {**{k: one[k] for k in ("rev", "status", "counts", "nodes")},
                                      "reload": False}  # fmt: skip
    assert changes(one, dict(one["nodes"]), one["rev"]) is None
    two = state(1, {**one["nodes"], "b": ["done", 2.0, "ran", ""]})
    update = changes(two, dict(one["nodes"]), one["rev"])
    assert update is not None and update["nodes"] == {"b": ["done", 2.0, "ran", ""]} and not update["reload"]
    voted = state(2, dict(two["nodes"]))  # a gate's vote: no node moved, the page reloads its panel
    update = changes(voted, dict(two["nodes"]), two["rev"])
    assert update is not None and update["nodes"] == {} and update["reload"]
