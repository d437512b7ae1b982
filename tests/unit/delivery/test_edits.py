"""The edit-in-place component both adapters share: its pace, its size policy, where keyed
messages are (memory bounded, backed by the store), where a run reports after a fallback, and
the follow-up's lifetime. A clock is injected; nothing else is stood in for."""

from __future__ import annotations

import asyncio
import hashlib

from core.commands.messages import Reply
from core.delivery.buttons import ButtonCommands
from core.delivery.edits import Edits, Posted, urgent
from core.delivery.envelope import Mode


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def progress(status: str, key: str = "progress:r1") -> Reply:
    return Reply(kind="progress", run_id="r1", run_status=status, how=Mode(replace_key=key))


def test_only_a_progress_edit_of_a_run_still_moving_waits_its_turn() -> None:
    assert not urgent(progress("running")) and not urgent(progress("pending"))
    for status in ("completed", "failed", "paused", "needs_attention", "cancelled"):
        assert urgent(progress(status))
    assert urgent(Reply(kind="run_completed", run_id="r1", run_status="completed"))
    assert urgent(Reply(kind="gate_waiting", run_id="r1", run_status="paused"))


def test_a_key_is_edited_at_most_once_per_interval_and_at_once_after_rest_or_when_closing() -> None:
    clock = Clock()
    edits = Edits(interval=1.0, clock=clock)
    assert edits.due_in("progress:r1") == 0
    edits.edited("progress:r1")
    clock.now += 0.25
    assert edits.due_in("progress:r1") == 0.75
    assert edits.due_in("progress:r2") == 0  # each key has its own pace
    edits.rested("progress:r1")
    assert edits.due_in("progress:r1") == 0
    edits.edited("progress:r1")
    edits.hurry()
    assert edits.due_in("progress:r1") == 0


def test_no_file_while_the_run_moves_and_one_file_per_keyed_message() -> None:
    edits = Edits()
    assert not edits.attaches("slack", progress("running"), too_long=True)
    assert not edits.attaches("slack", progress("completed"), too_long=False)
    at_rest = progress("completed")
    assert edits.attaches("slack", at_rest, too_long=True)
    edits.filed("slack", at_rest)
    assert not edits.attaches("slack", progress("failed"), too_long=True)  # its one file went
    assert edits.attaches("discord", at_rest, too_long=True)  # per platform
    one_off = Reply(kind="run_completed", run_id="r1", run_status="completed")
    edits.filed("slack", one_off)
    assert edits.attaches("slack", one_off, too_long=True)  # a message of its own: its own file


def test_where_a_keyed_message_is_survives_memory_through_the_store() -> None:
    kept: dict[tuple[str, str], str] = {}
    edits = Edits(remember=lambda p, k, v: kept.__setitem__((p, k), v),
                  recall=lambda p, k: kept.get((p, k)), memory=2)
    for n in range(3):
        edits.keep("discord", f"progress:r{n}", Posted("C1", (f"{n}1", f"{n}2")))
    assert [key for _, key in edits._posted] == ["progress:r1", "progress:r2"]  # newest two
    assert edits.posted("discord", "progress:r0") == Posted("C1", ("01", "02"))  # from the store
    assert edits.posted("slack", "progress:r0") is None  # per platform
    edits.move("discord", "r0", "C2")
    assert edits.moved("discord", "r0") == "C2"
    assert edits.posted("discord", "progress:r0") is None  # posted anew where it reports now
    assert kept[("discord", "message:progress:r0")] == ""


def test_a_follow_up_lives_its_time_and_its_uses() -> None:
    clock = Clock()
    edits = Edits(clock=clock)
    edits.follow_up("slack", "r1", "https://hooks/1", ttl=1800, uses=2)
    assert edits.follow_up_of("slack", "r1", use=False) == "https://hooks/1"
    assert edits.follow_up_of("slack", "r1") == "https://hooks/1"
    assert edits.follow_up_of("slack", "r1") == "https://hooks/1"
    assert edits.follow_up_of("slack", "r1") is None  # used up
    edits.follow_up("discord", "r1", "send", ttl=840)
    clock.now += 841
    assert edits.follow_up_of("discord", "r1") is None  # its token expired


async def test_one_lock_per_key_is_forgotten_once_nobody_holds_it() -> None:
    edits = Edits()
    order: list[str] = []

    async def hold(name: str) -> None:
        async with edits.holding("slack", "progress:r1"):
            order.append(f"{name} in")
            await asyncio.sleep(0.01)
            order.append(f"{name} out")

    await asyncio.gather(hold("a"), hold("b"))
    assert order == ["a in", "a out", "b in", "b out"]
    assert edits._locks == {}


def test_long_button_commands_are_kept_by_content_in_one_store() -> None:
    blobs: dict[str, bytes] = {}

    def put(data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return digest

    buttons = ButtonCommands(put, lambda d: blobs[d])
    command = "run deploy --force " + "x" * 3000
    ref = buttons.keep(command)
    assert ref == buttons.keep(command) and len(ref) == 64
    assert buttons.command(ref) == command
    assert buttons.command("0" * 64) is None and buttons.command("not-a-ref") is None
    # what a button carries within a platform's limit: the command, else its reference
    assert buttons.value("runs", 10) == "runs" and buttons.command_of("runs") == "runs"
    assert buttons.value(command, 2000) == f"ref:{ref}" and buttons.command_of(f"ref:{ref}") == command
    assert buttons.command_of("ref:" + "0" * 64) is None  # a reference nobody kept
