"""The tools, each the chat command it names, sent as the calling principal.

Every tool call becomes one `ChatMessage` (`principal` set, `is_command`) handled by the same
`Handler` chat uses: the same parser, authorization, compare-and-swap, redaction and audit
(the audit row's actor is the principal); `approve` and `reject` are a `Ballot` instead
(`Handler.decide`), so no comment or value is ever read as a command. The replies that come
back are data; this module turns them into an `Answer`: JSON about the run (id, handle,
status, what it waits for, its page) and the reply's own words on one line. No rule lives
here: what an agent may do is what `core/commands` lets the principal do.

Where the agent's runs report: `BATON_MCP_POST_TO` (`slack:C024BE7LH`), so people see them
and decide their gates in chat; the command's "started" reply is posted there like a
person's would be (it opens the run's thread). Unset: the conversation `mcp:<name>` of the
platform `mcp`, which only the agent reads, through these tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from core.commands import replies as replies_
from core.commands.handler import Handler
from core.commands.messages import ChatMessage, Reply
from core.commands.quoting import quote_word
from core.engine.approval_policy import APPROVE, REJECT
from core.engine.ballots import Ballot, Source
from core.engine.engine import Engine
from core.engine.events import EngineEvent, NodeState
from core.engine.subruns import waiting_child
from core.errors import RunNotFound, UsageError
from core.redaction import Redactor
from core.render import render_text
from core.store.port import Blobs, Runs
from core.store.records import Run, RunStatus

PLATFORM = "mcp"  # runs an agent starts when BATON_MCP_POST_TO is unset report here (nowhere)
POLL = 0.5  # seconds between reads of the store while waiting (a decision in another process)
MAX_WAIT = 600.0  # the longest one wait_run call waits; call it again to wait longer
TEXT_LIMIT = 600  # characters of the one-line text
#: the replies that ask for something instead of doing it: an error to the agent
ASKING = frozenset({"input_form", "approval_values"})


class ToolStore(Protocol):
    """The store roles the tools read (they change runs through the handler and the engine)."""

    @property
    def runs(self) -> Runs: ...
    @property
    def blobs(self) -> Blobs: ...


class Baton(Protocol):
    """What the tools need of `bot.app.Baton` (adapters never import `bot`)."""

    @property
    def store(self) -> ToolStore: ...
    @property
    def engine(self) -> Engine: ...
    @property
    def handler(self) -> Handler: ...
    @property
    def redactor(self) -> Redactor: ...


@dataclass(frozen=True, slots=True)
class Answer:
    """One tool's result: `data` (JSON), `text` (one line), `error` (an MCP tool error)."""

    data: dict[str, Any]
    text: str
    error: bool = False


def attention(run: Run, gate_waiting: bool) -> str | None:
    """What the run waits for from a person: `gate`, `needs_attention`, `queued`, or None (a
    run paused on a `workflow:` step whose child waits: `child`, told by `AgentTools._view`)."""
    status = str(run.status)
    if status == RunStatus.PAUSED and gate_waiting:
        return "gate"
    if status in (RunStatus.NEEDS_ATTENTION, "queued"):
        return status
    return None


class AgentTools:
    """The operations behind the MCP tools, for whichever principal calls them."""

    def __init__(self, baton: Baton, *, post_to: str | None, poll: float = POLL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.baton = baton
        self.handler = baton.handler
        self.place = tuple(post_to.split(":", 1)) if post_to else None
        self.poll = poll
        self.clock = clock

    # -- the tools ---------------------------------------------------------------------------

    async def list_workflows(self, principal: str) -> Answer:
        replies = await self._command(principal, ["list"])
        return self._answer(principal, replies, lambda r: {
            "workflows": list(r.data.get("workflows", [])), "broken": list(r.data.get("broken", []))})

    async def run_workflow(self, principal: str, workflow: str, message: str | None = None,
                           args: Mapping[str, Any] | None = None, force: bool = False,
                           replace: str | None = None) -> Answer:
        words = ["run", _q(workflow)]
        if args is not None:
            words += ["--args", _q(json.dumps(dict(args), ensure_ascii=False))]
        if force:
            words.append("--force")
        if replace is not None:
            words += ["--replace", _q(replace)]
        if message is not None:
            words.append(_q(message))
        replies = await self._command(principal, words)
        prompt = next((r for r in replies if r.kind == "fresh_run_prompt"), None)
        if prompt is not None:
            return self._choice(principal, prompt, workflow, message, args)
        started = next((r for r in replies if r.kind == "run_started"), None)
        if started is not None:
            await self._announce(started)
        return self._answer(principal, replies, lambda r: {})

    async def get_run(self, principal: str, run: str) -> Answer:
        replies = await self._command(principal, ["status", _q(run)])
        return self._answer(principal, replies, lambda r: {"nodes": [
            {"node": n["node_id"], "state": n["state"], "error": n.get("error") or None}
            for n in r.data.get("nodes", ())]})

    async def list_runs(self, principal: str, workflow: str | None = None,
                        status: str | None = None) -> Answer:
        words = ["runs"]  # filtered in the query: the newest 20 of that workflow or status
        if workflow is not None:
            words += ["--workflow", _q(workflow)]
        if status is not None:
            words += ["--status", _q(status)]
        replies = await self._command(principal, words)
        if not replies or replies[-1].is_error:
            return self._answer(principal, replies, lambda r: {})
        found_runs = [self.baton.store.runs.get_run(item["id"]) for item in replies[-1].data.get("runs", ())]
        runs = [self._view(principal, r) for r in found_runs]
        return Answer(self._clean({"runs": runs}), self.line(replies_.runs(found_runs)))

    async def wait_run(self, principal: str, run: str, timeout_s: float = 60.0) -> Answer:
        first = await self._command(principal, ["status", _q(run)])  # may they see it? (audited)
        if not first or first[-1].is_error or first[-1].run_id is None:
            return self._answer(principal, first, lambda r: {})
        run_id = first[-1].run_id
        deadline = self.clock() + max(0.0, min(float(timeout_s), MAX_WAIT))
        moved = asyncio.Event()

        async def on_event(event: EngineEvent) -> None:
            if event.run_id == run_id:
                moved.set()

        unsubscribe = self.baton.engine.subscribe(on_event)
        try:
            while True:
                current = self.baton.store.runs.get_run(run_id)
                if current.status.resting:
                    break
                left = deadline - self.clock()
                if left <= 0:
                    break
                moved.clear()  # a run moving in this process wakes us; another process's, the poll
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(moved.wait(), min(self.poll, left))
        finally:
            unsubscribe()
        view = self._view(principal, current)
        view["timed_out"] = not current.status.resting
        summary = self.baton.engine.summary(current)
        return Answer(self._clean(view), self.line(replies_.status(current, summary)))

    async def approve(self, principal: str, run: str, comment: str | None = None,
                      values: Mapping[str, Any] | None = None, choice: str | None = None) -> Answer:
        ballot = Ballot(principal, run, choice or APPROVE, comment or "", dict(values or {}), Source.AGENT,
                        chose=choice is not None)
        return self._answer(principal, await self._decide(principal, ballot), lambda r: {"decision": r.kind})

    async def reject(self, principal: str, run: str, reason: str) -> Answer:
        ballot = Ballot(principal, run, REJECT, reason or "", source=Source.AGENT)
        return self._answer(principal, await self._decide(principal, ballot), lambda r: {"decision": r.kind})

    async def resume(self, principal: str, run: str) -> Answer:
        return self._answer(principal, await self._command(principal, ["resume", _q(run)]), lambda r: {})

    async def abandon(self, principal: str, run: str) -> Answer:
        return self._answer(principal, await self._command(principal, ["abandon", _q(run)]), lambda r: {})

    async def get_output(self, principal: str, run: str, node: str) -> Answer:
        first = await self._command(principal, ["status", _q(run)])  # may they see it? (audited)
        if not first or first[-1].is_error or first[-1].run_id is None:
            return self._answer(principal, first, lambda r: {})
        target = self.baton.store.runs.get_run(first[-1].run_id)
        detail = self.baton.engine.inspect(target, plan=False)
        found = detail.node(node)
        if found is None or found.output_digest is None:
            nodes = ", ".join(n.node_id for n in detail.nodes) or "none"
            missing = RunNotFound(f"`{node}` has no stored output in run {target.id} (its nodes: {nodes}).",
                                  hint="get_run shows which nodes have finished.")
            return self._answer(principal, [replies_.error(missing, target)], lambda r: {})
        raw = self.baton.store.blobs.get_blob(found.output_digest).decode("utf-8", errors="replace")
        output: Any = raw
        with contextlib.suppress(ValueError):
            output = json.loads(raw)
        data = {**self._view(principal, target), "node": node, "state": str(found.state), "output": output}
        return Answer(self._clean(data), _one_line(self.baton.redactor.redact(raw)))

    def mistake(self, error: str, hint: str) -> Answer:
        """A call no tool can take (an unknown tool; an argument missing, unknown or of the wrong
        type: `adapters.mcp.arguments`), as a tool error like every other refusal."""
        return self._answer("", [replies_.error(UsageError(error, hint=hint))], lambda r: {})

    # -- translation ---------------------------------------------------------------------------

    async def _command(self, principal: str, words: Sequence[str]) -> list[Reply]:
        """`words`: the command's words, every value quoted (`_q`): a value is never a flag."""
        platform, conversation = self.place or (PLATFORM, principal)
        message = ChatMessage(
            platform=platform, conversation=conversation, user=principal,
            text=" ".join(words), event_id=f"mcp-{uuid.uuid4().hex}",
            principal=principal,
        )
        return await self.handler.handle(message)

    async def _decide(self, principal: str, ballot: Ballot) -> list[Reply]:
        """`ballot` decided as the principal's (`Handler.decide`): no command text is composed."""
        platform, conversation = self.place or (PLATFORM, principal)
        origin = ChatMessage(platform=platform, conversation=conversation, user=principal, text="",
                             event_id=f"mcp-{uuid.uuid4().hex}", principal=principal)
        return await self.handler.decide(ballot, origin)

    async def _announce(self, started: Reply) -> None:
        """The "started" reply, posted where the run reports, as a person's command would be;
        it opens the run's thread. Not posted when that platform is not served here."""
        if self.place is None or started.run_id is None:
            return
        platform, conversation = self.place
        shown = started.at(platform=platform, conversation=conversation).sent(ephemeral=False)
        posted = await self.handler.announce(shown)
        if not posted:
            await self.handler.attach_thread(started.run_id, None)

    def _answer(self, principal: str, replies: Sequence[Reply],
                extra: Callable[[Reply], dict[str, Any]]) -> Answer:
        """The command's last reply (the one that says what became of it) as an `Answer`."""
        if not replies:  # the handler answers a duplicate event with nothing (not a fresh id's fate)
            replies = [replies_.error(UsageError("Nothing was done: this call was already handled.",
                                                 hint="Call get_run to see the run."))]
        last = replies[-1]
        text = self.line(last)
        if last.is_error or last.kind in ASKING:
            error, hint = _cause_and_step(last.data.get("message") or text, last.data.get("hint") or "")
            data: dict[str, Any] = {"error": error, "hint": hint}
            if last.kind in ASKING:
                asked = last.data.get("missing") or ()
                missing = [m.get("name") if isinstance(m, Mapping) else m for m in asked]
                data |= {"error": text, "missing": missing, "asked": last.kind}
            if last.run_id is not None:
                data["run"] = last.run_id
            return Answer(self._clean(data), text, error=True)
        data = {}
        if last.run_id is not None:
            data = self._view(principal, self.baton.store.runs.get_run(last.run_id))
        data |= extra(last)
        return Answer(self._clean(data), text)

    def _choice(self, principal: str, prompt: Reply, workflow: str, message: str | None,
                args: Mapping[str, Any] | None) -> Answer:
        """The fresh-run prompt as data: resume the unfinished run, replace it, or force a new one."""
        old = self.baton.store.runs.get_run(prompt.run_id or "")
        view = self._view(principal, old)
        again: dict[str, Any] = {"workflow": workflow}
        if message is not None:
            again["message"] = message
        if args is not None:
            again["args"] = dict(args)
        first = ({"option": "resume", "tool": "wait_run", "arguments": {"run": old.id, "timeout_s": 60},
                  "note": "its gate waits for a person"} if view["attention"] == "gate"
                 else {"option": "resume", "tool": "resume", "arguments": {"run": old.id}})
        options: list[dict[str, Any]] = [
            first,
            {"option": "replace", "tool": "run_workflow", "arguments": {**again, "replace": old.id}},
            {"option": "force", "tool": "run_workflow", "arguments": {**again, "force": True}},
        ]
        data = {"choice": "unfinished_run", "unfinished": view, "options": options}
        # the chat prompt's words name chat commands (`/workflow approve …`): an agent is told
        # the tool calls it may make, the same as `options`
        calls = "; ".join(f"{o['option']}: {o['tool']} {json.dumps(o['arguments'], ensure_ascii=False)}"
                          for o in options)
        text = (f"Nothing started: your {old.workflow} run {old.id} is unfinished ({old.status}). "
                f"Pick one of the options: {calls}.")
        return Answer(self._clean(data), _one_line(self.baton.redactor.redact(text)))

    def _view(self, principal: str, run: Run) -> dict[str, Any]:
        """The run as an agent needs it: ids, status, what it waits for, where it reports."""
        engine = self.baton.engine
        gate = engine.gates.waiting(run) if run.status is RunStatus.PAUSED else None
        needs = attention(run, gate is not None)
        waiting: dict[str, Any] | None = None
        if needs == "gate" and gate is not None:
            waiting = {"gate": gate.node_id, "question": gate.prompt}
        elif needs == "needs_attention":
            nodes = [n.node_id for n in engine.summary(run).nodes if n.state is NodeState.ATTENTION]
            waiting = {"nodes": nodes}
        elif run.status is RunStatus.PAUSED and (
            child := waiting_child(self.baton.store.runs, run)
        ) is not None:
            asked = engine.gates.waiting(child)  # `approve <this run>` decides it
            needs = "child"
            waiting = {"child": child.id, "gate": asked.node_id if asked else None,
                       "question": asked.prompt if asked else child.reason}
        pages = self.handler.pages
        page = pages.run_link(run, principal).url if pages is not None and principal else None
        return {
            "run": run.id, "workflow": run.workflow, "status": str(run.status), "handle": run.handle,
            "requester": run.requester, "attention": needs, "waiting_for": waiting, "page": page,
            "reports_to": {"platform": run.platform, "conversation": run.conversation, "thread": run.thread},
        }

    def line(self, reply: Reply) -> str:
        """The reply's own words (the console's templates), on one line."""
        return _one_line(render_text(reply, "console", self.baton.redactor))

    def _clean(self, data: dict[str, Any]) -> dict[str, Any]:
        cleaned: dict[str, Any] = self.baton.redactor.redact_value(data)
        return cleaned


def _q(value: str) -> str:
    """A value as one quoted word of a command: `--force` given as a message stays the message."""
    return quote_word(value)


def _cause_and_step(message: str, hint: str) -> tuple[str, str]:
    """An error's cause and next step. A refusal that says both on its one line, its next step
    after a semicolon (the edge's "… does not accept; remove it and send it again."), has them
    apart here: an agent reads `hint` for what to do."""
    if hint or "; " not in message:
        return message, hint
    cause, step = message.rsplit("; ", 1)
    return cause + ".", step[:1].upper() + step[1:]


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= TEXT_LIMIT else flat[: TEXT_LIMIT - 1] + "…"
