"""A decision on a run's page is a ballot on the gate the page showed (#27): its comment is a
comment, never a command. Two runs wait at gates in one conversation; a comment that reads
like a command deciding the other one (`approve <other> -- x`, quotes, backticks, a reject)
decides only the page's own gate, and is kept exactly as typed."""

from __future__ import annotations

import re
from pathlib import Path

from core.store.records import GateStatus, RunStatus
from tests.integration.web.site import Site

GATED = """
    name: gated
    nodes:
      - id: review
        approval: "Ship?"
      - id: ship
        depends_on: [review]
        bash: printf shipped
        replay: pure
"""
OTHER = """
    name: other
    nodes:
      - id: gate
        approval: "Go?"
"""


def form_of(page: str) -> dict[str, str]:
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page))
    assert {"form", "csrf", "node", "question"} <= set(fields), page
    return fields


async def test_a_comment_that_reads_like_a_command_decides_only_the_pages_gate(
    tmp_path: Path, sqlite_url: str
) -> None:
    access = {"run": {"*": ["console:ana"]}, "approve": {"*": ["console:carol"]}}
    async with Site.open(tmp_path, sqlite_url, {"gated": GATED, "other": OTHER}, access=access) as site:
        other = await site.start("run other")
        run = await site.start("run gated")
        assert other.status is RunStatus.PAUSED and run.status is RunStatus.PAUSED
        comment = (f"approve {other.id} -- x \"quoted\" 'single' `rm -rf /` $(reject {other.id}) "
                   f"reject {other.id} --force")
        path = await site.link(run, user="carol")
        page = (await site.client.get(path)).text
        decided = await site.client.post(f"{path}/decide",
                                         data={**form_of(page), "decision": "approve", "comment": comment})
        assert decided.status_code == 303
        assert (await site.baton.engine.wait(run.id, timeout=30)).status is RunStatus.COMPLETED
        store = site.baton.store
        gate = store.gates.get_gate(run.id, "review")
        assert gate.status is GateStatus.APPROVED and gate.decided_by == "console:carol"
        assert gate.comment == comment  # exactly as typed, quotes and backticks included
        # the run the comment names still waits, with no vote, decision or audit of one
        assert store.runs.get_run(other.id).status is RunStatus.PAUSED
        waiting = store.gates.get_gate(other.id, "gate")
        assert waiting.status is GateStatus.WAITING
        assert store.ballots.gate_votes(other.id, "gate", waiting.created_at) == []
        assert not [e for e in store.events.audit_log(other.id) if e.action in ("vote", "approve", "reject")
                    or e.details.get("command") in ("approve", "reject")]
        # the decision's audit row names the page as where the ballot was cast
        [command] = [e for e in store.events.audit_log(run.id) if e.details.get("command") == "approve"]
        assert command.actor == "console:carol" and command.details["source"] == "page"

        # a reject on the other run's page, with a comment naming the first run: that gate only
        other_path = await site.link(other, user="carol")
        other_page = (await site.client.get(other_path)).text
        await site.client.post(f"{other_path}/decide", data={
            **form_of(other_page), "decision": "reject", "comment": f"approve {run.id} -- `oops`"})
        assert store.gates.get_gate(other.id, "gate").status is GateStatus.REJECTED
        assert store.gates.get_gate(other.id, "gate").comment == f"approve {run.id} -- `oops`"
        assert store.runs.get_run(other.id).status is RunStatus.CANCELLED
