"""`baton mcp` over stdio, driven by the SDK's client: the tools do what the chat commands do,
as BATON_MCP_PRINCIPAL, with the same refusals."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from core.store.repository import SqlStore
from tests.e2e.mcp.client import mcp_env, stdio_session
from tests.e2e.process import BatonProcess

TOOLS = {"list_workflows", "run_workflow", "get_run", "list_runs", "wait_run", "approve", "reject",
         "resume", "abandon", "get_output"}


async def test_list_run_wait_approve_and_read_a_gated_run(tmp_path: Path, database_url: str) -> None:
    """Two agents, two `baton mcp` processes on one database (SQLite, then PostgreSQL)."""
    starter = mcp_env(database_url, tmp_path, BATON_MCP_PRINCIPAL="mcp:agent-a")
    reviewer = mcp_env(database_url, tmp_path, BATON_MCP_PRINCIPAL="mcp:agent-b")
    async with stdio_session(starter, tmp_path) as agent:
        described = await agent.tools()
        assert set(described) == TOOLS
        assert all(len(d) > 60 for d in described.values())  # written for a model, not a stub

        listed = await agent.call("list_workflows")
        assert not listed.error
        assert {"gated", "humans", "marker"} <= {w["name"] for w in listed.data["workflows"]}

        started = await agent.call("run_workflow", workflow="gated", message="v1")
        assert not started.error, started.text
        run = started.data["run"]
        assert started.data["requester"] == "mcp:agent-a"
        assert started.data["handle"].startswith("args:")
        assert "\n" not in started.text and run in started.text

        waited = await agent.call("wait_run", run=run, timeout_s=60)
        assert waited.data["status"] == "paused" and waited.data["attention"] == "gate", waited.text
        assert waited.data["waiting_for"] == {"gate": "review", "question": "Ship it?"}

        # the agent that started it may not approve it: the chat's refusal, as a tool error
        own = await agent.call("approve", run=run)
        assert own.error
        assert "never decides a gate of its own run" in own.text
        own_reject = await agent.call("reject", run=run, reason="not mine to judge")
        assert own_reject.error and "never decides a gate of its own run" in own_reject.text
        assert "approves" not in own_reject.text
        assert (await agent.call("get_run", run=run)).data["status"] == "paused"

        # another agent, granted `approve`, may (its own process, the same store)
        async with stdio_session(reviewer, tmp_path) as other:
            decided = await other.call("approve", run=run, comment="looks fine")
            assert not decided.error, decided.text
            assert decided.data["decision"] == "gate_decided"
            done = await other.call("wait_run", run=run, timeout_s=60)
            assert done.data["status"] == "completed", done.text

        done = await agent.call("wait_run", run=run, timeout_s=60)
        assert done.data["status"] == "completed" and done.data["attention"] is None
        got = await agent.call("get_run", run=run)
        assert {n["node"]: n["state"] for n in got.data["nodes"]}["ship"] in ("done", "cached")
        output = await agent.call("get_output", run=run, node="ship")
        assert output.data["output"] == {"shipped": True}
        runs = await agent.call("list_runs", workflow="gated", status="completed")
        assert [r["run"] for r in runs.data["runs"]] == [run]

    store = SqlStore(database_url)  # every call audited, with the principal as the actor
    try:
        trail = {(e.actor, e.action) for e in store.events.audit_log(run)}
    finally:
        store.close()
    assert {("mcp:agent-a", "start"), ("mcp:agent-a", "refused"), ("mcp:agent-b", "vote")} <= trail


async def test_resume_a_failed_run_and_the_three_option_choice(tmp_path: Path, sqlite_url: str) -> None:
    # relative: the step looks in its run directory (its sandbox shows it that, not tmp_path)
    marker = "marker"
    env = mcp_env(sqlite_url, tmp_path, BATON_MCP_PRINCIPAL="mcp:agent-a")
    async with stdio_session(env, tmp_path) as agent:
        first = await agent.call("run_workflow", workflow="marker", args={"marker": str(marker)})
        run = first.data["run"]
        failed = await agent.call("wait_run", run=run, timeout_s=60)
        assert failed.data["status"] == "failed", failed.text

        # a second run_workflow never resumes silently: the choice comes back as data
        again = await agent.call("run_workflow", workflow="marker", args={"marker": str(marker)})
        assert not again.error
        assert again.data["choice"] == "unfinished_run"
        assert again.data["unfinished"]["run"] == run
        options = {o["option"]: o for o in again.data["options"]}
        assert set(options) == {"resume", "replace", "force"}
        assert options["resume"] == {"option": "resume", "tool": "resume", "arguments": {"run": run}}
        assert options["force"]["arguments"]["force"] is True
        assert options["replace"]["arguments"]["replace"] == run
        # its one line names the tool calls, never a chat command the agent cannot type
        assert f'resume: resume {{"run": "{run}"}}' in again.text and "/workflow" not in again.text

        (tmp_path / ".baton" / "runs" / run / marker).write_text("ok")
        resumed = await agent.call(options["resume"]["tool"], **options["resume"]["arguments"])
        assert not resumed.error, resumed.text
        assert resumed.data["run"] == run
        done = await agent.call("wait_run", run=run, timeout_s=60)
        assert done.data["status"] == "completed", (await agent.call("get_run", run=run)).data["nodes"]

        # the same run_workflow now starts at once: nothing of it is unfinished
        fresh = await agent.call("run_workflow", workflow="marker", args={"marker": str(marker)})
        assert fresh.data["run"] != run and "choice" not in fresh.data


async def test_refusals_are_tool_errors_with_cause_and_next_step(tmp_path: Path, sqlite_url: str) -> None:
    stranger = mcp_env(sqlite_url, tmp_path, BATON_MCP_PRINCIPAL="mcp:stranger")
    async with stdio_session(stranger, tmp_path) as agent:
        refused = await agent.call("run_workflow", workflow="gated")
        assert refused.error
        assert "mcp:stranger may not run `gated`" in refused.text
        assert refused.data["error"].startswith("mcp:stranger may not run")
        assert (await agent.call("list_workflows")).data["workflows"] == []
        unknown = await agent.call("get_run", run="ffffff")
        assert unknown.error and "\n" not in unknown.text

    env = mcp_env(sqlite_url, tmp_path, BATON_MCP_PRINCIPAL="mcp:agent-a")
    async with stdio_session(env, tmp_path) as agent:
        run = (await agent.call("run_workflow", workflow="humans")).data["run"]
        assert (await agent.call("wait_run", run=run, timeout_s=60)).data["attention"] == "gate"
    other = mcp_env(sqlite_url, tmp_path, BATON_MCP_PRINCIPAL="mcp:agent-b")
    async with stdio_session(other, tmp_path) as agent:  # not its run, an approver: still refused
        refused = await agent.call("approve", run=run)
        assert refused.error and "humans_only" in refused.text
        assert (await agent.call("get_run", run=run)).data["status"] == "paused"
        missing = await agent.call("run_workflow", workflow="marker")
        assert missing.error and missing.data["missing"] == ["marker"]


async def test_reject_someone_elses_gate_and_abandon_ones_own_run(tmp_path: Path, sqlite_url: str) -> None:
    starter = mcp_env(sqlite_url, tmp_path, BATON_MCP_PRINCIPAL="mcp:agent-a")
    reviewer = mcp_env(sqlite_url, tmp_path, BATON_MCP_PRINCIPAL="mcp:agent-b")
    async with stdio_session(starter, tmp_path) as agent, stdio_session(reviewer, tmp_path) as other:
        first = (await agent.call("run_workflow", workflow="gated", message="one")).data["run"]
        assert (await agent.call("wait_run", run=first, timeout_s=60)).data["attention"] == "gate"
        refused = await other.call("abandon", run=first)  # not its run
        assert refused.error and "belongs to mcp:agent-a" in refused.text
        rejected = await other.call("reject", run=first, reason="not this week")
        assert not rejected.error, rejected.text
        assert rejected.data["status"] == "cancelled"
        nothing = await agent.call("get_output", run=first, node="ship")  # it never ran
        assert nothing.error and "`ship` has no stored output" in nothing.text and "get_run" in nothing.text
        listed = await agent.call("list_runs", status="cancelled")
        assert [r["run"] for r in listed.data["runs"]] == [first] and first in listed.text

        second = (await agent.call("run_workflow", workflow="gated", message="two")).data["run"]
        assert (await agent.call("wait_run", run=second, timeout_s=60)).data["attention"] == "gate"
        abandoned = await agent.call("abandon", run=second)
        assert not abandoned.error, abandoned.text
        assert abandoned.data["status"] == "cancelled" and abandoned.data["attention"] is None


async def test_sigterm_stops_baton_mcp_even_while_the_client_holds_stdin_open(
    tmp_path: Path, sqlite_url: str
) -> None:
    env = mcp_env(sqlite_url, tmp_path, BATON_LOG_LEVEL="INFO")
    baton = await BatonProcess.start(env, "mcp", cwd=tmp_path, stdin=asyncio.subprocess.PIPE)
    await baton.wait_log("action=engine_started")
    assert await baton.stop(timeout=20) == 0  # SIGTERM: engine stopped, store closed, exit
    assert "action=engine_stopped" in baton.output


async def test_approve_with_the_values_a_gates_form_asks_for(tmp_path: Path, sqlite_url: str) -> None:
    starter = mcp_env(sqlite_url, tmp_path, BATON_MCP_PRINCIPAL="mcp:agent-a")
    reviewer = mcp_env(sqlite_url, tmp_path, BATON_MCP_PRINCIPAL="mcp:agent-b")
    async with stdio_session(starter, tmp_path) as agent, stdio_session(reviewer, tmp_path) as other:
        run = (await agent.call("run_workflow", workflow="sized")).data["run"]
        assert (await agent.call("wait_run", run=run, timeout_s=60)).data["attention"] == "gate"
        asked = await other.call("approve", run=run)  # a form is filled in, never assumed
        assert asked.error and asked.data["asked"] == "approval_values"
        wrong = await other.call("approve", run=run, values={"replicas": True})  # JSON's true, not text
        assert wrong.error and "got boolean true" in wrong.text and 'text "true"' not in wrong.text
        decided = await other.call("approve", run=run, values={"replicas": 5}, comment="five")
        assert not decided.error, decided.text
        assert (await agent.call("wait_run", run=run, timeout_s=60)).data["status"] == "completed"
        review = await agent.call("get_output", run=run, node="review")
        assert review.data["output"]["values"] == {"replicas": 5}
        scaled = await agent.call("get_output", run=run, node="scale")
        assert scaled.data["output"].strip() == "scaling to 5"


async def test_in_a_shared_conversation_only_the_principals_own_unfinished_run_asks_first(
    tmp_path: Path, sqlite_url: str
) -> None:
    marker = str(tmp_path / "never")
    shared = {"BATON_MCP_POST_TO": "console:ops"}  # both agents' runs report to one conversation
    a = mcp_env(sqlite_url, tmp_path, BATON_MCP_PRINCIPAL="mcp:agent-a", **shared)
    b = mcp_env(sqlite_url, tmp_path, BATON_MCP_PRINCIPAL="mcp:agent-b", **shared)
    async with stdio_session(a, tmp_path) as agent, stdio_session(b, tmp_path) as other:
        failed = (await agent.call("run_workflow", workflow="marker", args={"marker": marker})).data
        assert failed["reports_to"] == {"platform": "console", "conversation": "ops", "thread": None}
        assert (await agent.call("wait_run", run=failed["run"], timeout_s=60)).data["status"] == "failed"

        theirs = await other.call("run_workflow", workflow="marker", args={"marker": marker})
        assert "choice" not in theirs.data and theirs.data["requester"] == "mcp:agent-b"

        mine = await agent.call("run_workflow", workflow="marker", args={"marker": marker})
        assert mine.data["choice"] == "unfinished_run" and mine.data["unfinished"]["run"] == failed["run"]


async def test_a_parent_waiting_on_its_childs_gate_says_so_and_approving_it_continues_both(
    tmp_path: Path, sqlite_url: str
) -> None:
    starter = mcp_env(sqlite_url, tmp_path, BATON_MCP_PRINCIPAL="mcp:agent-a")
    reviewer = mcp_env(sqlite_url, tmp_path, BATON_MCP_PRINCIPAL="mcp:agent-b")
    async with stdio_session(starter, tmp_path) as agent:
        started = await agent.call("run_workflow", workflow="gated-parent")
        assert not started.error, started.text
        run = started.data["run"]
        waited = await agent.call("wait_run", run=run, timeout_s=60)
        assert waited.data["status"] == "paused" and waited.data["attention"] == "child", waited.text
        child = waited.data["waiting_for"]["child"]
        assert waited.data["waiting_for"] == {"child": child, "gate": "review", "question": "Ship it?"}
        async with stdio_session(reviewer, tmp_path) as other:
            decided = await other.call("approve", run=run)  # the parent's id decides the child's gate
            assert not decided.error, decided.text
            assert (await other.call("wait_run", run=child, timeout_s=60)).data["status"] == "completed"
        done = await agent.call("wait_run", run=run, timeout_s=60)
        assert done.data["status"] == "completed", done.text
        output = await agent.call("get_output", run=run, node="child")
        assert output.data["output"]["outputs"]["ship"] == '{"shipped": true}'


async def test_list_runs_filters_before_the_newest_20_and_refuses_an_unknown_status(
    tmp_path: Path, sqlite_url: str
) -> None:
    env = mcp_env(sqlite_url, tmp_path, BATON_MCP_PRINCIPAL="mcp:agent-a")
    async with stdio_session(env, tmp_path) as agent:
        gated = (await agent.call("run_workflow", workflow="gated", message="old")).data["run"]
        assert (await agent.call("wait_run", run=gated, timeout_s=60)).data["attention"] == "gate"
        newer = [(await agent.call("run_workflow", workflow="quick", message=str(n))).data["run"]
                 for n in range(21)]  # more than one page of runs of another workflow, all newer
        assert len(set(newer)) == 21

        of_gated = await agent.call("list_runs", workflow="gated")
        assert not of_gated.error and [r["run"] for r in of_gated.data["runs"]] == [gated], of_gated.text
        paused = await agent.call("list_runs", status="paused")
        assert [r["run"] for r in paused.data["runs"]] == [gated], paused.text
        assert len((await agent.call("list_runs", workflow="quick")).data["runs"]) == 20

        bogus = await agent.call("list_runs", status="bogus")
        assert bogus.error and "\n" not in bogus.text
        assert "bogus" in bogus.data["error"] and "needs_attention" in bogus.data["error"]
        assert bogus.data["hint"], bogus.data


async def test_argument_mistakes_are_one_line_tool_errors_with_error_and_hint(
    tmp_path: Path, sqlite_url: str
) -> None:
    env = mcp_env(sqlite_url, tmp_path, BATON_MCP_PRINCIPAL="mcp:agent-a")
    mistakes = [
        ("get_run", {}, "`run` is required by get_run"),
        ("get_run", {"run": 123}, "`run` must be text (a JSON string), not the number 123"),
        ("run_workflow", {"workflow": "gated", "args": [1, 2]}, "`args` must be a JSON object, not an array"),
        ("run_workflow", {"workflow": "gated", "force": "yes"},
         '`force` must be true or false, not the string "yes"'),  # never read as true
        ("wait_run", {"run": "ffff", "timeout_s": -1}, "`timeout_s` must be a number from 0 to 600"),
        ("wait_run", {"run": "ffff", "timeout": 5}, "`timeout` is not an argument of wait_run"),
        ("list_runs", {"status": "bogus"}, "`status` is one of pending, running"),
        ("nope_tool", {}, "There is no tool `nope_tool`"),
    ]
    async with stdio_session(env, tmp_path) as agent:
        for tool, arguments, says in mistakes:
            got = await agent.call(tool, **arguments)
            assert got.error and "\n" not in got.text and says in got.text, (tool, got)
            assert set(got.data) == {"error", "hint"} and says in got.data["error"], (tool, got.data)
            assert got.data["hint"] and "pydantic" not in got.text + got.data["hint"]
        assert (await agent.call("list_runs")).data["runs"] == []  # `force: "yes"` started nothing

        nul = await agent.call("get_run", run="3f\x00a")  # refused at the edge: a cause and a step
        assert nul.error and "NUL byte" in nul.data["error"] and nul.data["hint"].startswith("Remove it")


async def test_a_line_the_sdk_cannot_read_is_answered_not_dropped(tmp_path: Path, sqlite_url: str) -> None:
    """Raw lines on `baton mcp`'s stdin: before, a lone surrogate or `{not json` got no reply
    at all and the client waited forever."""
    env = mcp_env(sqlite_url, tmp_path, BATON_MCP_PRINCIPAL="mcp:agent-a")
    agent = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.main", "mcp", env=env, cwd=tmp_path, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    stdin, stdout = agent.stdin, agent.stdout
    assert stdin is not None and stdout is not None

    async def said(line: bytes) -> dict[str, Any]:
        stdin.write(line + b"\n")
        await stdin.drain()
        reply: dict[str, Any] = json.loads(await asyncio.wait_for(stdout.readline(), 30))
        return reply

    def call(ident: int, name: str, arguments: str) -> bytes:
        return (f'{{"jsonrpc": "2.0", "id": {ident}, "method": "tools/call", '
                f'"params": {{"name": "{name}", "arguments": {arguments}}}}}').encode()

    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {},
                 "clientInfo": {"name": "t", "version": "1"}}
        assert "result" in await said(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                  "params": hello}).encode())
        stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')

        surrogate = await said(call(2, "get_run", '{"run": "\\ud800"}'))
        assert surrogate["id"] == 2 and surrogate["result"]["isError"] is True
        refused = surrogate["result"]["structuredContent"]
        assert "lone surrogate" in refused["error"] and refused["hint"]
        assert "\n" not in surrogate["result"]["content"][0]["text"]

        garbled = await said(b"{not json")
        assert garbled["id"] is None and garbled["error"]["code"] == -32700

        nan = await said(call(3, "wait_run", '{"run": "ffff", "timeout_s": NaN}'))
        assert nan["result"]["structuredContent"]["error"].endswith("not NaN.")

        still = await said(call(4, "list_runs", "{}"))  # the connection goes on
        assert still["id"] == 4 and still["result"]["structuredContent"] == {"runs": []}
    finally:
        stdin.close()
        await asyncio.wait_for(agent.wait(), 30)
