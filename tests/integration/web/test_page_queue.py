"""A queued run's page says why it waits and behind whom, and offers to take it out of the
queue; on the runtime `baton run` assembles."""

from __future__ import annotations

import re
from pathlib import Path

from core.store.records import RunStatus
from tests.integration.web.site import Site

SHIP = """
    name: ship
    concurrency: {key: deploy-prod, limit: 1}
    nodes:
      - id: prepare
        bash: printf prepared
        replay: pure
      - id: review
        depends_on: [prepare]
        approval: "Ship?"
"""


async def test_a_queued_runs_page_says_why_it_waits(tmp_path: Path, sqlite_url: str) -> None:
    async with Site.open(tmp_path, sqlite_url, {"ship": SHIP}) as site:
        holder = await site.start("run ship v1")
        assert holder.status is RunStatus.PAUSED
        answer = await site.say("run ship v2 --force")
        queued = site.baton.store.runs.get_run(answer[0].run_id or "")
        assert queued.status is RunStatus.QUEUED
        page = (await site.client.get(await site.link(queued))).text
        text = re.sub(r"<[^>]+>", "", page)
        assert f"Queued #1 for deploy-prod, behind {holder.id[:6]} (paused at review for" in text
        assert f"/workflow cancel {queued.id}" in text
        held = re.sub(r"<[^>]+>", "", (await site.client.get(await site.link(holder))).text)
        assert "Queued #" not in held
