"""The run page in a real browser (Playwright + Debian's Chromium), against `baton run` itself.

The main scenario drives the real process: the console is its chat (stdin/stdout), the page
is served on BATON_WEB_PORT. Open the link the chat gives, see the graph, watch a node go
from running to done while the run moves (no reload), approve the gate on the page and see
the decision and the run's end arrive in the chat.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from adapters.console.messages import to_chat_message
from adapters.web.links import PageLinks
from bot.app import build_baton
from bot.http import bind
from bot.serve import serve_web as serve
from core.store.records import RunStatus
from tests.e2e.console.cli import baton_env
from tests.e2e.web.browser import Lines, chromium
from tests.integration.web.site import settings_for, write_workflows
from tests.integration.web.test_pages_http import TOOLS, wide


async def _until(page: object, expression: str, timeout: float = 20.0) -> None:
    """Poll `expression` in the page until it is true. Playwright's `wait_for_function` with a
    string compiles it inside the page, which the pages' CSP (`script-src 'self'`, no
    'unsafe-eval') refuses once its first check was false; `evaluate` runs it as a whole."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await page.evaluate(expression):  # type: ignore[attr-defined]
        if loop.time() > deadline:
            raise AssertionError(f"never true in the page: {expression}")
        await asyncio.sleep(0.1)

LIVE = """
    name: live
    nodes:
      - id: warm
        bash: printf warm
        replay: pure
      - id: hold
        depends_on: [warm]
        bash: read -r line < {fifo}; printf 'got %s' "$line"
        replay: pure
      - id: review
        depends_on: [hold]
        approval: "Ship {{{{ nodes.hold.output }}}}?"
      - id: ship
        depends_on: [review]
        bash: printf shipped
        replay: pure
"""


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_watch_a_run_move_and_approve_it_on_the_page(tmp_path: Path, sqlite_url: str) -> None:
    fifo = tmp_path / "workflows" / "hold.fifo"  # in its workflow directory: the step's sandbox shows it
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    write_workflows(tmp_path, {"live": LIVE.format(fifo=fifo)})
    port = free_port()
    env = baton_env(sqlite_url, tmp_path, BATON_WEB_PORT=str(port), BATON_LOG_LEVEL="WARNING")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.main", "run", "--conversation", "ops", "--user", "ana",
        cwd=tmp_path, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdin is not None and process.stdout is not None
    chat = Lines(process.stdout)

    async def say(text: str) -> None:
        assert process.stdin is not None
        process.stdin.write(text.encode() + b"\n")
        await process.stdin.drain()

    try:
        await say("run live go")
        started, at = await chat.expect(r"\[\d\] Open run\s+/workflow open (\w+)")
        run_id = started.group(1)
        await say(f"open {run_id}")
        link, at = await chat.expect(rf"(http://127\.0\.0\.1:{port}/r/[\w.\-]+)", after=at)
        async with chromium() as browser:
            page = await browser.new_page()
            await page.goto(link.group(1))
            assert await page.locator("svg.dag g.box").count() == 4
            await page.wait_for_selector("#b-warm.s-done")
            await page.wait_for_selector("#b-hold.s-running", timeout=20_000)
            await page.evaluate("window.__sameDocument = true")
            await asyncio.to_thread(fifo.write_text, "green\n")  # the step reads it and finishes
            await page.wait_for_selector("#b-hold.s-done", timeout=20_000)
            await page.wait_for_selector("#r-hold.s-done td.st:text('done')")
            # the row updated live has what a reload would show: its start time, its output
            await page.wait_for_selector("#r-hold details.preview", timeout=10_000)
            assert (await page.locator("#r-hold td").nth(3).inner_text()).endswith("Z")
            await _until(page, "document.title.includes(' · paused · ')")
            await page.wait_for_selector("#r-ship.s-waiting", timeout=20_000)  # waits, not skipped
            assert "waits for `review`" in await page.locator("#r-ship .reason").inner_text()
            assert await page.evaluate("window.__sameDocument === true")  # updated live, not reloaded
            approve = page.locator("#gates button[value=approve]")
            await approve.wait_for(timeout=20_000)  # the gate panel arrived with the run's pause
            assert "Ship got green?" in await page.locator("#gates").inner_text()
            await page.fill("#gates input[name=comment]", "looks right from the page")
            async with page.expect_navigation():
                await approve.click()
            assert "Approved" in await page.locator(".flash").inner_text()
            _, at = await chat.expect(r"Approved the gate review of live run .*\(by ana\): "
                                         r"“looks right from the page”", after=at)
            await chat.expect(rf"live run {run_id} completed", after=at)
            await page.wait_for_selector("#run-status.s-completed", timeout=20_000)
            await page.wait_for_selector("#b-ship.s-done")
            # the tab and the header follow the run: every node done, nothing left "running"
            await _until(page, "document.title.includes(' · completed · ')")
            await _until(page, "document.querySelector('#head .counts').textContent"
                               ".replace(/\\s+/g, ' ').trim() === 'done 4 of 4 nodes'")
            # the audit table breaks lines between words, never inside one
            wraps = await page.eval_on_selector_all(
                "table.audit td", "cells => cells.map(c => getComputedStyle(c).overflowWrap)")
            assert wraps and "anywhere" not in wraps
    finally:
        if process.returncode is None:
            process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()


async def test_a_1000_node_run_reads_well_and_bad_links_are_refused(tmp_path: Path, sqlite_url: str) -> None:
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    access = {"run": {"*": ["console:ana"]}, "approve": {"*": ["console:ana"]}}
    # 1000 tool calls: unsandboxed, each is a call on the event loop; in the sandbox each is a
    # Python process of its own (docs/operations.md), minutes on a loaded 2-core machine. This
    # test is about the page; the sandboxed tool is tests/e2e/console/test_sandbox.py's.
    settings = settings_for(tmp_path, sqlite_url, {"wide": wide(1000)}, tool_modules=[TOOLS],
                            web_port=port, access=access, step_sandbox="none")
    baton = build_baton(settings)
    try:
        async with baton.running(handle_signals=False):
            server = asyncio.create_task(serve(baton, settings, sock=sock))
            started = await baton.handler.handle(to_chat_message("run wide", "ops", "ana"))
            run = await baton.engine.wait(started[0].run_id or "", timeout=120)
            assert run.status is RunStatus.COMPLETED
            answer = await baton.handler.handle(to_chat_message(f"open {run.id}", "ops", "ana"))
            url = str(answer[0].data["url"])
            links = baton.handler.pages
            assert isinstance(links, PageLinks)
            async with chromium() as browser:
                page = await browser.new_page()
                response = await page.goto(url)
                assert response is not None and response.status == 200
                assert await page.locator("svg.dag.compact g.box.s-done").count() == 1000
                assert await page.locator("tr.node").count() == 1000
                assert await page.locator("#c-done").inner_text() == "1000"
                assert await page.locator("details#g-done-box").get_attribute("open") is None  # collapsed
                await page.fill("#q", "n99")  # find as you type: n99 and n990..n999
                visible = page.locator("tr.node:not([hidden])")
                assert await visible.count() == 11
                await page.goto(url + "?q=n99")  # the same without JavaScript: a GET form
                assert "11 of 1000 nodes match" in await page.locator("#nodes").inner_text()
                past = PageLinks(base_url=settings.page_base_url, ttl=settings.web_link_ttl,
                                 key=links.secret, clock=lambda: 1_000_000.0)
                token = url.rsplit("/", 1)[1]
                refused = {
                    "expired": past.run_link(run, "console:ana").url,
                    "another user": links.run_link(run, "console:bob").url,
                    "tampered": url[:-3] + ("aaa" if not url.endswith("aaa") else "bbb"),
                    "a run link as a list link": f"{settings.page_base_url}/c/{token}",
                }
                for why, bad in refused.items():
                    response = await page.goto(bad)
                    assert response is not None and response.status == 403, why
                    shown = await page.locator("main").inner_text()
                    assert "n999" not in shown and "wide" not in shown, why
                    assert ("expired" in shown) == (why == "expired"), why
            baton.request_stop()
            await server
    finally:
        baton.close()


async def test_a_big_runs_groups_and_graph_load_when_opened(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big run's page (past `LAZY_OVER`, lowered here) lists the failed node; opening the
    done group and the graph fetches them through the page's link, in the browser."""
    from core.commands import page_view as view
    from tests.integration.web.test_pages_http import wide_with_failure

    monkeypatch.setattr(view, "LAZY_OVER", 20)
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    access = {"run": {"*": ["console:ana"]}, "approve": {"*": ["console:ana"]}}
    settings = settings_for(tmp_path, sqlite_url, {"wide": wide_with_failure(30)}, tool_modules=[TOOLS],
                            web_port=port, access=access, step_sandbox="none")  # fmt: skip
    baton = build_baton(settings)
    try:
        async with baton.running(handle_signals=False):
            server = asyncio.create_task(serve(baton, settings, sock=sock))
            started = await baton.handler.handle(to_chat_message("run wide", "ops", "ana"))
            run = await baton.engine.wait(started[0].run_id or "", timeout=120)
            assert run.status is RunStatus.FAILED
            answer = await baton.handler.handle(to_chat_message(f"open {run.id}", "ops", "ana"))
            url = str(answer[0].data["url"])
            async with chromium() as browser:
                page = await browser.new_page()
                response = await page.goto(url)
                assert response is not None and response.status == 200
                assert await page.locator("tr.node").count() == 1  # the failed node only
                assert await page.locator("#c-done").inner_text() == "30"
                await page.locator("details#g-done-box > summary").click()  # open the group
                await page.locator("tr.node.s-done").nth(29).wait_for()
                assert await page.locator("tr.node.s-done").count() == 30
                assert await page.locator("tr.deferred").count() == 0
                await page.locator("a[data-graph]").click()
                await page.locator("svg.dag g.box").nth(30).wait_for()
                assert await page.locator("svg.dag g.box").count() == 31
            baton.request_stop()
            await server
    finally:
        baton.close()
