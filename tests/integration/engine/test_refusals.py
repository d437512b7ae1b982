"""What a refused action says about the run as it is: who set its status, and how."""

from __future__ import annotations

import pytest

from core.errors import RunNotResumable
from tests.integration.engine.harness import Harness

HOLD = """
name: hold
nodes:
  - id: wait
    bash: test -f {{ inputs.go }} && exec sleep 30
    replay: pure
"""


async def test_resuming_a_run_someone_resumed_names_who_resumed_it(harness: Harness) -> None:
    h = harness
    h.write("hold.yaml", HOLD)
    go = h.root / "go"
    failed = await h.run("hold", {"go": str(go)})
    go.write_text("")
    await h.engine.resume(failed.id, actor="console:ana")

    with pytest.raises(RunNotResumable) as refused:
        await h.engine.resume(failed.id, actor="console:bob")

    assert refused.value.message == f"run {failed.id} is already running (resumed by console:ana)"
    assert refused.value.by == "console:ana"
    await h.engine.abandon(failed.id, actor="console:ana")
