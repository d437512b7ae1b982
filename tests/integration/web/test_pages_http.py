"""Run pages over HTTP, on the runtime `baton run` assembles: headers, redaction, links that
act as one user for one run, decisions through chat's authorization, CSRF, batched reads."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from adapters.web.links import PageLinks
from core.commands.page_view import PAGE_CHARS, Parts, snapshot_of
from core.store.records import GateStatus, RunStatus
from tests.integration.web.site import Site

SECRET = "sk-page-secret-7f3a9c"
TYPED = "hunter2-typed-secret"

GATED = """
    name: gated
    nodes:
      - id: prepare
        bash: printf 'prepared %s' {{ inputs.message }}
        replay: pure
      - id: review
        depends_on: [prepare]
        approval: "Ship {{ nodes.prepare.output }}?"
      - id: ship
        depends_on: [review]
        bash: printf shipped
        replay: pure
"""
LEAKY = f"""
    name: leaky
    nodes:
      - id: talk
        bash: printf 'the key is {SECRET} and %s' {{{{ inputs.message }}}}
        replay: pure
      - id: crash
        depends_on: [talk]
        bash: printf 'stderr has {SECRET}' >&2; exit 3
        replay: pure
"""
BIG = """
    name: big
    nodes:
      - id: spill
        bash: python3 -c "print('x' * 200000, end='')"
        replay: pure
"""


def wide(n: int) -> str:
    """A workflow of `n` pure tool steps, each after the one at half its index (a tree)."""
    lines = ["name: wide", "nodes:"]
    for i in range(n):
        lines.append(f"  - id: n{i}\n    tool: page_ping")
        if i:
            lines.append(f"    depends_on: [n{(i - 1) // 2}]")
    return "\n".join(lines) + "\n"


TOOLS = str(Path(__file__).with_name("page_tools.py"))

HEADERS = {
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
}


def assert_safe_headers(response: Any) -> None:
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert "no-store" in response.headers["cache-control"]
    for name, value in HEADERS.items():
        assert response.headers[name] == value, name


async def test_security_headers_on_every_answer(tmp_path: Path, sqlite_url: str) -> None:
    async with Site.open(tmp_path, sqlite_url, {"gated": GATED}) as site:
        run = await site.start("run gated hi")
        path = await site.link(run)
        answers = [
            await site.client.get(path),
            await site.client.get(f"{path}?node=prepare"),
            await site.client.get(f"{path}/nodes/prepare/output"),
            await site.client.get("/r/not-a-token"),
            await site.client.get("/"),
            await site.client.get("/static/page.js"),
            await site.client.post(f"{path}/decide", data={"decision": "approve"}),
        ]
        assert [a.status_code for a in answers] == [200, 200, 200, 403, 404, 200, 403]
        for answer in answers:
            assert_safe_headers(answer)
        page = answers[0].text
        assert "<script>" not in page and " style=" not in page  # nothing inline for the CSP to allow
        cookie = answers[0].headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie


async def test_page_shows_graph_states_verdicts_gate_audit_and_commands(
    tmp_path: Path, sqlite_url: str
) -> None:
    async with Site.open(tmp_path, sqlite_url, {"gated": GATED}) as site:
        run = await site.start("run gated hi")
        assert run.status is RunStatus.PAUSED
        page = (await site.client.get(await site.link(run))).text
        assert re.search(r'<g id="b-prepare" class="box s-done"', page)
        assert re.search(r'<g id="b-review" class="box s-waiting"', page)
        assert re.search(r'<g id="b-ship" class="box s-waiting"', page)  # waits for the gate
        assert "waits for <code>review</code>" in page or "waits for `review`" in page
        assert 'class="box s-skipped"' not in page
        assert page.count("<path d=") == 2  # prepare -> review -> ship
        assert "no earlier result" in page  # the cache verdict's reason
        assert "Ship prepared hi?" in page and 'value="approve"' in page  # the gate, decidable by ana
        for command in (f"/workflow approve {run.id}", f"/workflow plan {run.id}",
                        f"/workflow run gated --resume-from {run.id}", "/workflow run gated --force hi"):
            assert command in page
        assert "start" in page and "console:ana" in page  # the audit


async def test_no_secret_reaches_a_page_a_download_or_a_live_update(tmp_path: Path, sqlite_url: str) -> None:
    async with Site.open(tmp_path, sqlite_url, {"leaky": LEAKY}, openai_api_key=SECRET,
                         web_secret="signing-key-that-stays-hidden") as site:
        run = await site.start(f"run leaky {SECRET}")
        assert run.status is RunStatus.FAILED
        path = await site.link(run)
        shown = [
            (await site.client.get(path)).text,
            (await site.client.get(f"{path}?node=talk")).text,
            (await site.client.get(f"{path}?node=crash")).text,
            (await site.client.get(f"{path}/nodes/talk/output")).text,
            str(snapshot_of(Parts(site.baton.store, site.baton.engine, site.baton.catalog,
                                  site.settings.access_policy, site.baton.redactor), run.id)),
        ]
        for text in shown:
            assert SECRET not in text
            assert "signing-key-that-stays-hidden" not in text
        assert "the key is •••" in shown[1] and "stderr has •••" in shown[2]
        assert "the key is •••" in shown[3]


async def test_a_link_works_only_unchanged_unexpired_for_its_run_and_user(
    tmp_path: Path, sqlite_url: str
) -> None:
    access = {"run": {"*": ["console:ana"]}, "approve": {"*": ["console:ana"]}}
    async with Site.open(tmp_path, sqlite_url, {"gated": GATED}, access=access) as site:
        run = await site.start("run gated hi")
        path = await site.link(run)
        assert (await site.client.get(path)).status_code == 200
        token = path.removeprefix("/r/")
        payload, signature = token.split(".")
        flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
        for tampered in (f"/r/{payload}.{flipped}", f"/r/{payload[:-2]}.{signature}", f"/c/{token}"):
            refused = await site.client.get(tampered)
            assert refused.status_code == 403 and "not valid" in refused.text
            assert run.id not in refused.text
        past = PageLinks(base_url="", ttl=site.settings.web_link_ttl, key=site.links.secret,
                         clock=lambda: 1_000_000.0)
        expired = await site.client.get(past.run_link(run, "console:ana").url)
        assert expired.status_code == 403 and "expired" in expired.text
        assert f"/workflow open {run.id}" in expired.text
        # bob may not view ana's run: chat refuses him a link, and a link made for him opens nothing
        refused_in_chat = await site.say(f"open {run.id}", user="bob")
        assert refused_in_chat[0].is_error and "may not inspect" in refused_in_chat[0].data["message"]
        for_bob = site.links.run_link(run, "console:bob").url.removeprefix("http://127.0.0.1:8080")
        answers = [await site.client.get(for_bob + tail) for tail in ("", "/nodes/prepare/output", "/events")]
        for answer in answers:
            assert answer.status_code == 403 and "prepared hi" not in answer.text


async def test_nothing_is_reachable_without_a_link(tmp_path: Path, sqlite_url: str) -> None:
    async with Site.open(tmp_path, sqlite_url, {"gated": GATED}) as site:
        run = await site.start("run gated hi")
        for path in ("/", "/r", "/r/", f"/r/{run.id}", "/c/x", "/r/x/events", "/r/x/nodes/prepare/output",
                     "/static/../core/config.py", "/static/%2e%2e/core/config.py", "/favicon.ico"):
            answer = await site.client.get(path)
            assert answer.status_code in (403, 404), path
            assert run.id not in answer.text and "prepared" not in answer.text, path
        posted = await site.client.post(f"/r/{run.id}/decide", data={"decision": "approve"})
        assert posted.status_code in (403, 404)
        assert site.baton.store.runs.get_run(run.id).status is RunStatus.PAUSED


def form_of(page: str) -> dict[str, str]:
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page))
    assert {"form", "csrf", "node", "question"} <= set(fields), page
    return fields


async def test_a_decision_on_the_page_uses_chats_authorization_and_is_told_in_chat(
    tmp_path: Path, database_url: str
) -> None:
    access = {"run": {"*": ["console:ana"]}, "approve": {"gated": ["console:carol"]}}
    async with Site.open(tmp_path, database_url, {"gated": GATED}, access=access) as site:
        run = await site.start("run gated hi")
        # ana may view (she asked for it) but not approve: the page offers her no form, and a
        # form she builds from carol's page is refused by the same check as in chat
        ana_path = await site.link(run, user="ana")
        ana_page = (await site.client.get(ana_path)).text
        assert 'value="approve"' not in ana_page and "may not decide" in ana_page
        carol_path = site.links.run_link(run, "console:carol").url.removeprefix("http://127.0.0.1:8080")
        carol_page = (await site.client.get(carol_path)).text
        fields = form_of(carol_page)
        ana_try = await site.client.post(f"{ana_path}/decide", data={**fields, "decision": "approve"})
        assert ana_try.status_code == 403  # the form belongs to carol's link
        assert site.baton.store.gates.get_gate(run.id, "review").status is GateStatus.WAITING
        decided = await site.client.post(f"{carol_path}/decide",
                                         data={**fields, "decision": "approve", "comment": "ship it"})
        assert decided.status_code == 303
        after = await site.baton.engine.wait(run.id, timeout=30)
        assert after.status is RunStatus.COMPLETED
        gate = site.baton.store.gates.get_gate(run.id, "review")
        assert gate.status is GateStatus.APPROVED and gate.decided_by == "console:carol"
        assert gate.comment == "ship it"
        await site.baton.handler.drain()
        told = [r for r in site.told if r.kind == "gate_decided"]
        assert told and told[0].data["by"] == "console:carol" and told[0].to.conversation == run.conversation
        flash = (await site.client.get(carol_path)).text
        assert "approved" in flash.lower()


async def test_a_refused_decision_is_the_same_refusal_as_in_chat(tmp_path: Path, sqlite_url: str) -> None:
    access = {"run": {"*": ["console:ana", "console:dan"]}, "approve": {"gated": ["console:carol"]}}
    async with Site.open(tmp_path, sqlite_url, {"gated": GATED}, access=access) as site:
        run = await site.start("run gated hi")
        dan = site.links.run_link(run, "console:dan").url.removeprefix("http://127.0.0.1:8080")
        carol = site.links.run_link(run, "console:carol").url.removeprefix("http://127.0.0.1:8080")
        await site.client.get(dan)
        fields = form_of((await site.client.get(carol)).text)
        # dan may view (he may run it) but not approve: his own form would be the page's
        # button he never gets; forged with his link's CSRF field, it is still refused
        dan_fields = {**fields, "csrf": site_csrf(site, dan, fields["form"])}
        answer = await site.client.post(f"{dan}/decide", data={**dan_fields, "decision": "approve"})
        assert answer.status_code == 303
        flash = (await site.client.get(dan)).text
        assert "is not an approver of" in flash
        assert site.baton.store.gates.get_gate(run.id, "review").status is GateStatus.WAITING
        audit = site.baton.store.events.audit_log(run.id)
        assert any(e.action == "refused" and e.actor == "console:dan" for e in audit)


def site_csrf(site: Site, path: str, form_id: str) -> str:
    from adapters.web.security import COOKIE, Csrf

    cookie = site.client.cookies.get(COOKIE)
    assert cookie
    csrf = Csrf(site.links.secret, secure=False, public_origin="")
    return csrf.field(cookie, path.removeprefix("/r/"), form_id)


async def test_posts_need_the_cookie_the_field_and_this_origin(tmp_path: Path, sqlite_url: str) -> None:
    async with Site.open(tmp_path, sqlite_url, {"gated": GATED}) as site:
        run = await site.start("run gated hi")
        path = await site.link(run)
        fields = form_of((await site.client.get(path)).text)
        good = {**fields, "decision": "approve"}
        attempts = [
            ({**good, "csrf": "0" * 64}, {}),
            ({**good, "form": "another-form"}, {}),
            (good, {"Origin": "https://evil.example"}),
            (good, {"Sec-Fetch-Site": "cross-site"}),
            (good, {"Origin": "null"}),
            (good, {"Origin": "null", "Sec-Fetch-Site": "same-site"}),
        ]
        for data, headers in attempts:
            answer = await site.client.post(f"{path}/decide", data=data, headers=headers)
            assert answer.status_code == 403 and "expired" in answer.text.lower()
        site.client.cookies.clear()
        answer = await site.client.post(f"{path}/decide", data=good)
        assert answer.status_code == 403
        assert site.baton.store.gates.get_gate(run.id, "review").status is GateStatus.WAITING


async def test_a_form_sent_twice_decides_once_and_a_changed_question_is_not_decided(
    tmp_path: Path, sqlite_url: str
) -> None:
    async with Site.open(tmp_path, sqlite_url, {"gated": GATED}) as site:
        run = await site.start("run gated hi")
        path = await site.link(run)
        fields = form_of((await site.client.get(path)).text)
        stale = await site.client.post(f"{path}/decide",
                                       data={**fields, "question": "0" * 32, "decision": "approve"})
        assert stale.status_code == 303
        assert "question changed" in (await site.client.get(path)).text
        assert site.baton.store.gates.get_gate(run.id, "review").status is GateStatus.WAITING
        first = await site.client.post(f"{path}/decide", data={**fields, "decision": "approve"})
        second = await site.client.post(f"{path}/decide", data={**fields, "decision": "approve"})
        assert first.status_code == second.status_code == 303
        await site.baton.engine.wait(run.id, timeout=30)
        approvals = [e for e in site.baton.store.events.audit_log(run.id) if e.action == "approve"]
        assert len(approvals) == 1


async def test_a_large_output_is_paged_and_downloadable_whole(tmp_path: Path, sqlite_url: str) -> None:
    async with Site.open(tmp_path, sqlite_url, {"big": BIG}) as site:
        run = await site.start("run big")
        path = await site.link(run)
        first = (await site.client.get(f"{path}?node=spill")).text
        pages = -(-200_000 // PAGE_CHARS)
        assert f"page 1 of {pages}" in first and "next →" in first
        assert "x" * PAGE_CHARS in first and "x" * (PAGE_CHARS + 1) not in first
        last = (await site.client.get(f"{path}?node=spill&page={pages}")).text
        assert f"page {pages} of {pages}" in last and "← previous" in last
        whole = await site.client.get(f"{path}/nodes/spill/output")
        assert whole.text == "x" * 200_000
        assert whole.headers["content-disposition"].startswith("attachment;")


def count_statements(site: Site) -> list[str]:
    seen: list[str] = []
    engine = site.baton.store._engine  # type: ignore[attr-defined]

    def note(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    sa.event.listen(engine, "before_cursor_execute", note)
    return seen


@pytest.mark.parametrize("size", [10, 300])
async def test_a_page_is_built_from_the_same_few_queries_whatever_its_size(
    tmp_path: Path, database_url: str, size: int
) -> None:
    # unsandboxed: each tool call is a call on the event loop, not a Python process of its own
    # (as test_browser.py's big runs); this test is about the page's queries, not the steps
    async with Site.open(tmp_path, database_url, {"wide": wide(size)}, tool_modules=[TOOLS],
                         step_sandbox="none") as site:
        run = await site.start("run wide")
        assert run.status is RunStatus.COMPLETED
        path = await site.link(run)
        seen = count_statements(site)
        page = await site.client.get(path)
        assert page.status_code == 200 and page.text.count('class="box s-done"') == size
        assert len(seen) <= 8, seen  # run, journal, blobs, gates, audit, args: never one per node


async def test_the_list_page_shows_the_conversations_runs_the_user_may_view(
    tmp_path: Path, sqlite_url: str
) -> None:
    access = {"run": {"gated": ["console:ana"], "big": ["console:bob"]}, "approve": {}}
    async with Site.open(tmp_path, sqlite_url, {"gated": GATED, "big": BIG}, access=access) as site:
        mine = await site.start("run gated hi", user="ana")
        theirs = await site.start("run big", user="bob")
        answer = await site.say("runs --open", user="ana")
        assert answer[0].kind == "page_link" and answer[0].how.ephemeral
        listing = await site.client.get(str(answer[0].data["url"]).removeprefix("http://127.0.0.1:8080"))
        assert listing.status_code == 200
        assert mine.id in listing.text and theirs.id not in listing.text
        run_path = re.search(r'href="(/r/[^"]+)"', listing.text)
        assert run_path is not None
        assert mine.id in (await site.client.get(run_path.group(1))).text


async def test_with_pages_off_chat_offers_no_link(tmp_path: Path, sqlite_url: str) -> None:
    async with Site.open(tmp_path, sqlite_url, {"gated": GATED}, web_port="off") as site:
        assert site.baton.handler.pages is None
        started = await site.say("run gated hi")
        assert started[0].kind == "run_started" and started[0].buttons == ()
        await site.baton.engine.wait(started[0].run_id or "", timeout=30)
        answer = await site.say(f"open {started[0].run_id}")
        assert answer[0].is_error and "turned off" in answer[0].data["message"]


async def test_replicas_given_the_same_web_secret_sign_with_one_key(
    tmp_path: Path, database_url: str
) -> None:
    # the key is never in the database (core/signing_key.py): replicas on several
    # machines share BATON_WEB_SECRET
    async with Site.open(tmp_path / "a", database_url, {"gated": GATED}, web_secret="one-for-all") as one, \
            Site.open(tmp_path / "b", database_url, {"gated": GATED}, web_secret="one-for-all") as two:
        run = await one.start("run gated hi")
        path = await one.link(run)
        assert one.links.secret() == two.links.secret()
        assert (await two.client.get(path)).status_code == 200


QUORUM = """
    name: quorum
    nodes:
      - id: prepare
        bash: printf 'prepared'
        replay: pure
      - id: review
        depends_on: [prepare]
        approval:
          question: "Ship {{ inputs.message }}?"
          approvers: [group:sre]
          required: 2
          requester_may_approve: false
          timeout: 4h
          choices: [approve, hotfix, reject]
      - id: ship
        depends_on: [review]
        bash: printf shipped
        replay: pure
"""


async def test_the_gate_panel_shows_the_policys_live_state_and_a_vote_moves_it(
    tmp_path: Path, sqlite_url: str
) -> None:
    access = {"groups": {"sre": ["console:sam", "console:sue"]},
              "run": {"*": ["console:ana", "console:sam", "console:sue"]}}
    async with Site.open(tmp_path, sqlite_url, {"quorum": QUORUM}, access=access) as site:
        run = await site.start("run quorum '<i>x</i>'")
        assert run.status is RunStatus.PAUSED
        parts = Parts(site.baton.store, site.baton.engine, site.baton.catalog, site.settings.access_policy,
                      site.baton.redactor)
        path = await site.link(run, user="sam")
        page = (await site.client.get(path)).text
        # the chat gate message's wording, from the same state and template
        assert "0/2 · needs @sre · requester excluded · expires in " in page
        assert "<code>hotfix</code>" in page
        assert "&lt;i&gt;x&lt;/i&gt;" in page and "<i>x</i>" not in page  # user text stays escaped
        before = snapshot_of(parts, run.id)
        assert before is not None
        voted = await site.client.post(f"{path}/decide",
                                       data={**form_of(page), "decision": "approve", "comment": "looks good"})
        assert voted.status_code == 303
        assert site.baton.store.gates.get_gate(run.id, "review").status is GateStatus.WAITING
        after = snapshot_of(parts, run.id)
        assert after is not None and after["rev"] != before["rev"]  # open pages reload the panel
        again = (await site.client.get(path)).text
        assert "1/2 · needs @sre · requester excluded" in again and "voted: console:sam" in again
        sue = await site.link(run, user="sue")
        sue_page = (await site.client.get(sue)).text
        await site.client.post(f"{sue}/decide",
                               data={**form_of(sue_page), "decision": "approve",
                                     "comment": "<b>ok</b> by me"})  # fmt: skip
        assert (await site.baton.engine.wait(run.id, timeout=30)).status is RunStatus.COMPLETED
        done = (await site.client.get(path)).text
        assert "1/2 · needs" not in done and "2/2 · needs" not in done  # who decided instead
        # after the quorum: every vote, with its comment, not only the last approver's
        votes = re.findall(r"<li><b>([^<]+)</b> · (\w+)[^<]*· [^<]*· “([^”]*)”</li>", done)
        assert votes == [("console:sam", "approve", "looks good"),
                         ("console:sue", "approve", "&lt;b&gt;ok&lt;/b&gt; by me")]


async def test_a_gate_with_a_form_shows_its_fields_and_a_page_approval_records_no_vote(
    tmp_path: Path, sqlite_url: str
) -> None:
    formed = QUORUM.replace("          choices:", "          form:\n"
                            "            window: {type: string, enum: [now, tonight], default: now}\n"
                            "          choices:")
    access = {"groups": {"sre": ["console:sam", "console:sue"]},
              "run": {"*": ["console:ana", "console:sam", "console:sue"]}}
    async with Site.open(tmp_path, sqlite_url, {"quorum": formed}, access=access) as site:
        run = await site.start("run quorum hi")
        path = await site.link(run, user="sam")
        page = (await site.client.get(path)).text
        assert "<code>window</code> (string: now / tonight, default now)" in page
        assert f"/workflow approve {run.id} hotfix window=…" in page
        await site.client.post(f"{path}/decide", data={**form_of(page), "decision": "approve"})
        assert site.baton.store.ballots.gate_votes(run.id, "review", run_gate_opened(site, run)) == []
        assert "0/2" in (await site.client.get(path)).text
        # a vote with values in chat, then the proposal approved on the page: both votes listed
        await site.say(f"approve {run.id} hotfix window=tonight careful now", user="sam")
        sue = await site.link(run, user="sue")
        sue_page = (await site.client.get(sue)).text
        assert "proposed by sam: hotfix window=tonight" in sue_page
        await site.client.post(f"{sue}/decide", data={**form_of(sue_page), "decision": "approve"})
        assert (await site.baton.engine.wait(run.id, timeout=30)).status is RunStatus.COMPLETED
        done = (await site.client.get(path)).text
        assert "Approved (<code>hotfix</code>) by console:sue" in done
        assert "<li><b>console:sam</b> · hotfix <code>window=tonight</code> · " in done
        assert "“careful now”" in done
        assert "<li><b>console:sue</b> · hotfix <code>window=tonight</code> · " in done


def run_gate_opened(site: Site, run: Any) -> float:
    return site.baton.store.gates.get_gate(run.id, "review").created_at


async def test_the_commands_offer_approve_and_reject_only_to_who_may_decide(
    tmp_path: Path, sqlite_url: str
) -> None:
    access = {"run": {"*": ["console:ana", "console:cy"]}, "approve": {"*": ["console:ana"]}}
    async with Site.open(tmp_path, sqlite_url, {"gated": GATED}, access=access) as site:
        run = await site.start("run gated hi")
        assert run.status is RunStatus.PAUSED
        decider = (await site.client.get(await site.link(run))).text
        onlooker = (await site.client.get(await site.link(run, user="cy"))).text
        assert f"/workflow approve {run.id}" in decider and f"/workflow reject {run.id}" in decider
        assert f"/workflow approve {run.id}" not in onlooker and f"/workflow reject {run.id}" not in onlooker
        assert "Resume this run" not in onlooker  # a run at its gate is not resumed
        assert f"/workflow plan {run.id}" in onlooker


FOUR_EYES = """
    name: four-eyes
    nodes:
      - id: review
        approval: {question: "Ship it?", requester_may_approve: false}
"""


async def test_the_page_offers_no_decision_its_policy_would_refuse(tmp_path: Path, sqlite_url: str) -> None:
    """ana may approve the workflow, but this gate excludes its requester: her page must not
    offer Approve / Reject that a click would only have refused."""
    access = {"run": {"*": ["console:ana"]}, "approve": {"*": ["console:ana", "console:sue"]}}
    async with Site.open(tmp_path, sqlite_url, {"four-eyes": FOUR_EYES}, access=access) as site:
        run = await site.start("run four-eyes")
        assert run.status is RunStatus.PAUSED
        requester = (await site.client.get(await site.link(run))).text
        other = (await site.client.get(await site.link(run, user="sue"))).text
        assert f"/workflow approve {run.id}" not in requester and 'value="approve"' not in requester
        assert f"/workflow approve {run.id}" in other


MAPPED = """
    name: mapped
    nodes:
      - id: each
        map: {items: ["a", "bad", "c"], as: host}
        bash: |
          if [ "{{ host }}" = bad ]; then echo "{{ host }} is down" >&2; exit 1; fi
          printf 'deployed %s' "{{ host }}"
        replay: idempotent
"""


async def test_a_map_node_is_drawn_once_and_its_items_are_listed(tmp_path: Path, sqlite_url: str) -> None:
    async with Site.open(tmp_path, sqlite_url, {"mapped": MAPPED}) as site:
        run = await site.start("run mapped")
        assert run.status is RunStatus.FAILED
        page = (await site.client.get(await site.link(run))).text
        assert re.search(r'<g id="b-each" class="box s-failed"', page)
        assert '<g id="b-each[' not in page  # drawn once, not per item
        for item, state in (("each[0]", "done"), ("each[1]", "failed"), ("each[2]", "done")):
            assert re.search(rf'<tr id="r-{re.escape(item)}" class="node s-{state}"', page), item
        assert "bad is down" in page


SHIP_CHILD = """
    name: ship
    nodes:
      - id: review
        approval: "Ship?"
"""
RELEASE_PARENT = """
    name: release
    nodes:
      - id: api
        workflow: ship
"""


async def test_a_parents_page_links_its_childs_page_and_back(tmp_path: Path, sqlite_url: str) -> None:
    async with Site.open(tmp_path, sqlite_url, {"ship": SHIP_CHILD, "release": RELEASE_PARENT}) as site:
        parent = await site.start("run release")
        assert parent.status is RunStatus.PAUSED
        [child] = site.baton.store.runs.child_runs([parent.id])
        page = (await site.client.get(await site.link(parent))).text
        assert re.search(r'<tr id="r-api" class="node s-waiting"', page)
        assert f"waiting on child {child.id} at `review`" in page
        found = re.search(rf'<a class="child" href="([^"]+)">child run <code>{child.id}</code></a>', page)
        assert found, "the step links its child's page"
        child_page = await site.client.get(found.group(1))
        assert child_page.status_code == 200 and "Ship?" in child_page.text
        back = re.search(rf'<a class="parent" href="([^"]+)">parent <code>{parent.id}</code></a>',
                         child_page.text)
        assert back, "the child's page links its parent's"
        assert (await site.client.get(back.group(1))).status_code == 200


def wide_with_failure(n: int) -> str:
    """`wide(n)` and one bash step after them that fails: the run ends failed, n nodes done."""
    boom = f"  - id: boom\n    depends_on: [n{n - 1}]\n    bash: echo broken >&2; exit 3\n    replay: pure\n"
    return wide(n) + boom


async def test_a_big_runs_page_paints_its_summary_first_and_loads_the_rest_through_its_link(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `LAZY_OVER` nodes (lowered here: the rule, not the size, is under test) the first
    paint lists the failed node and the groups' counts; the done rows and the graph come from
    `/group/done` and `/graph`, which answer only to the page's own link."""
    from core.commands import page_view as view

    monkeypatch.setattr(view, "LAZY_OVER", 20)
    access = {"run": {"*": ["console:ana"]}, "approve": {"*": ["console:ana"]}}
    async with Site.open(tmp_path, sqlite_url, {"wide": wide_with_failure(30)}, tool_modules=[TOOLS],
                         access=access, step_sandbox="none") as site:  # unsandboxed: as above
        run = await site.start("run wide")
        assert run.status is RunStatus.FAILED
        path = await site.link(run)

        first = await site.client.get(path)

        assert first.status_code == 200
        assert 'id="r-boom"' in first.text and "broken" in first.text  # the failed node, first
        assert 'id="r-n1"' not in first.text and 'class="box' not in first.text  # no done row, no graph
        assert f'data-rows="{path}/group/done"' in first.text and "Show the 30 done nodes" in first.text
        assert f'data-graph="{path}/graph"' in first.text

        rows = await site.client.get(f"{path}/group/done")
        assert rows.status_code == 200 and rows.text.count('class="node s-done"') == 30
        graph = await site.client.get(f"{path}/graph")
        assert graph.status_code == 200 and graph.text.count('class="box s-') == 31
        # without JavaScript, the same links ask for the page with the group or the graph in it
        inline = await site.client.get(f"{path}?group=done")
        assert inline.text.count('class="node s-done"') == 30 and 'id="r-boom"' in inline.text
        assert (await site.client.get(f"{path}?graph=1")).text.count('class="box s-') == 31
        assert (await site.client.get(f"{path}/group/nonsense")).status_code == 404
        # a node of a closed group opened from the first paint: its detail (only its row is
        # built with the listed ones), its output as a file
        opened = (await site.client.get(f"{path}?node=n17")).text
        assert '<code>n17</code> <span class="state s-done">' in opened and 'id="r-n1"' not in opened
        assert 'id="r-boom"' in opened and "Show the 30 done nodes" in opened
        assert (await site.client.get(f"{path}/nodes/n17/output")).status_code == 200

        # the same checks as the page: a changed link, or one made for who may not view the run
        token = path.removeprefix("/r/")
        payload, signature = token.split(".")
        flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
        for_bob = site.links.run_link(run, "console:bob").url.removeprefix("http://127.0.0.1:8080")
        for bad in (f"/r/{payload}.{flipped}", for_bob, f"/c/{token}"):
            for tail in ("/group/done", "/graph"):
                refused = await site.client.get(bad + tail)
                assert refused.status_code in (403, 404), bad + tail
                assert "n17" not in refused.text and "box" not in refused.text, bad + tail
        assert (await site.client.get(f"/r/{payload}.{flipped}/group/done")).status_code == 403
        assert (await site.client.get(for_bob + "/graph")).status_code == 403


ARTIFACT = f"""
    name: artifact
    nodes:
      - id: pack
        bash: >-
          mkdir -p dist && printf 'key={SECRET}\\n' > dist/notes.txt &&
          printf 'ci:{SECRET}' | base64 -w0 >> dist/notes.txt && printf packed
        artifacts: [dist/*.txt]
        replay: pure
"""


async def test_an_artifact_downloads_redacted(tmp_path: Path, sqlite_url: str) -> None:
    async with Site.open(tmp_path, sqlite_url, {"artifact": ARTIFACT}, openai_api_key=SECRET) as site:
        run = await site.start("run artifact")
        assert run.status is RunStatus.COMPLETED
        path = await site.link(run)
        page = (await site.client.get(f"{path}?node=pack")).text
        assert "/nodes/pack/artifacts/dist/notes.txt" in page
        got = await site.client.get(f"{path}/nodes/pack/artifacts/dist/notes.txt")
        assert got.status_code == 200 and got.content.startswith("key=•••\n".encode())
        assert SECRET[2:10] not in got.content.decode() and "•••" in got.content.decode().splitlines()[1]
        assert got.headers["content-disposition"] == f'attachment; filename="{run.id}-pack-notes.txt"'
