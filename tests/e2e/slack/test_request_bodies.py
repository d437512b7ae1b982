"""The one HTTP server (bot/http.py) reads no request body past BATON_HTTP_MAX_BODY_BYTES.

`/slack/events` in HTTP mode faces the internet, and Bolt reads a request's whole body before
it can check the signature: anyone could make `baton run` hold gigabytes. The server answers
413 to a body declared too large before reading any of it, and stops reading a streamed one
(chunked, no length) at the limit, for every route (Slack's, `/mcp`, the pages' forms). The
real `baton run` process, Slack in HTTP mode against the mock Web API."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from adapters.mcp.identity import token_hash
from tests.e2e.process import BatonProcess
from tests.e2e.slack.conftest import SIGNING_SECRET
from tests.e2e.slack.harness import SlackHarness
from tests.e2e.slack.mock_slack import MockSlack
from tests.e2e.slack.test_process import slack_env

MIB = 1 << 20


def peak_rss(pid: int) -> int:
    """The process's peak resident memory, in bytes (`VmHWM`)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


async def declared(port: int, path: str, length: int) -> bytes:
    """The answer to a POST whose headers say `length` bytes follow, none of which are sent."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n".encode())
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 30)  # to the close
    finally:
        writer.close()


async def streamed(port: int, path: str, total: int) -> tuple[int, bytes]:
    """(bytes sent, the answer) of a chunked POST of `total` bytes, sent until the server stops
    taking them (it answers and closes the connection)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sent = 0
    answer = asyncio.ensure_future(reader.read())
    try:
        writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
        chunk = b"%x\r\n" % MIB + b"x" * MIB + b"\r\n"
        while sent < total and not answer.done():
            writer.write(chunk)
            await writer.drain()
            sent += MIB
    except ConnectionError:
        pass  # closed by the server while the body was still coming
    finally:
        writer.close()
    try:
        return sent, await asyncio.wait_for(answer, 30)
    except ConnectionError:
        return sent, b""


async def test_a_huge_body_is_refused_without_being_read(
    mock_slack: MockSlack, tmp_path: Path, sqlite_url: str
) -> None:
    env = slack_env(mock_slack, tmp_path, sqlite_url)
    env.update(BATON_PAGES="on", BATON_MCP_TOKENS=json.dumps({token_hash("agent-token-5b1"): "agent"}))
    base = f"http://127.0.0.1:{env['BATON_WEB_PORT']}"
    baton = await BatonProcess.start(env, cwd=tmp_path)
    slack = SlackHarness(f"{base}/slack/events", SIGNING_SECRET, mock_slack)
    try:
        await baton.wait_log("action=slack_started")
        before = peak_rss(baton.proc.pid)
        port = int(env["BATON_WEB_PORT"])
        for path in ("/slack/events", "/mcp", "/r/x/decide"):
            answer = await declared(port, path, 400 * MIB)
            assert answer.startswith(b"HTTP/1.1 413 ") and b"over 4,194,304 bytes" in answer, (path, answer)
        sent, answer = await streamed(port, "/slack/events", 400 * MIB)
        assert sent < 64 * MIB, f"{sent / MIB:.0f} MiB taken"  # it stopped reading at the limit
        assert answer == b"" or answer.startswith(b"HTTP/1.1 413 "), answer  # (or reset while sending)
        grown = peak_rss(baton.proc.pid) - before
        assert grown < 64 * MIB, f"baton run grew by {grown / MIB:.0f} MiB"
        assert (await slack.command('run gated "after"')).status == 200  # still serving
    finally:
        await slack.close()
        assert await baton.stop() == 0, baton.output
