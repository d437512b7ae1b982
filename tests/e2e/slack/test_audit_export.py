"""`/workflow audit --since 7d --format csv` on Slack: an admin gets the workspace's audit as a
file uploaded in the conversation; anyone else gets a one-line refusal and no file."""

from __future__ import annotations

import csv
import io

import pytest

from core.config import Access
from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import ANA, BOB
from tests.e2e.slack.steps import COMPLETED, command, start

ADMIN_ANA = Access(admins=[f"slack:{ANA}"], run={"*": ["*"]}, approve={"*": ["*"]})


@pytest.mark.parametrize("access", [ADMIN_ANA])
async def test_an_admin_gets_the_audit_as_a_csv_file_and_others_are_refused(e2e: SlackE2E) -> None:
    done = await start(e2e, 'run notes "v1, final"', rests_with=COMPLETED, user=BOB)

    mark = await command(e2e, "audit --since 7d --format csv", user=BOB)
    refused = await e2e.mock.wait_call("chat.postEphemeral", "admin", after=mark)
    assert refused.body.get("user") == BOB
    await e2e.settle()
    assert not any(c.method == "files.completeUploadExternal" for c in e2e.mock.calls[mark:])

    mark = await command(e2e, "audit --since 7d --format csv", user=ANA)
    told = await e2e.mock.wait_call("chat.postMessage", "baton-audit-", after=mark)
    assert "event" in told.text
    done_upload = await e2e.mock.wait_call("files.completeUploadExternal", after=mark)
    assert "baton-audit-" in str(done_upload.body)
    (data,) = [d for d in e2e.mock.uploads.values() if d]
    rows = list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")))
    assert {"at", "actor", "action", "run_id", "details"} == set(rows[0])
    started = [r for r in rows if r["action"] == "start"]
    assert [(r["actor"], r["run_id"]) for r in started] == [(f"slack:{BOB}", done.run_id)]
    assert any(r["action"] == "refused" and r["actor"] == f"slack:{BOB}" for r in rows)
