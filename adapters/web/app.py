"""The run pages as a Starlette app: routes translate requests to the views and back.

    GET  /r/<token>                              the run's page (works without JavaScript)
    GET  /r/<token>/events                       its live updates (server-sent events)
    GET  /r/<token>/group/<state>                a big run's group of nodes, when its page opens it
    GET  /r/<token>/graph                        a big run's graph, when its page opens it
    GET  /r/<token>/nodes/<node>/output          a node's whole output, redacted, as a file
    GET  /r/<token>/nodes/<node>/artifacts/<p>   one of its artifacts, redacted, as a file
    POST /r/<token>/decide                       approve or reject its waiting gate
    GET  /c/<token>                              a conversation's recent runs
    GET  /static/…                               the stylesheet and the script

Nothing else answers (404), and nothing under /r or /c without a valid link (403). A link
acts as its user (`links.Grant`): every request checks again that this user may view the
run (`core.commands.authz`). A decision is the user's ballot on the gate the page showed
(`Handler.decide`: the same authorization, policy, compare-and-swap, audit and dedupe by the
form's id as a chat `approve`/`reject`; the comment is never read as a command), and its reply
is posted in the run's thread.

The words are the templates' (templates/web): code passes a refusal's reason and what it
names (`Refused`), a note's name (`note.txt.j2`), a command's kind (`page_view.commands`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from adapters.web.dag import layout
from adapters.web.links import RUN, RUNS, Grant, LinkRefused, PageLinks
from adapters.web.security import COOKIE, Csrf, SecurityHeaders
from core.commands import authz, page_view
from core.commands.handler import Handler
from core.commands.messages import ChatMessage
from core.engine.ballots import Ballot, Source
from core.engine.inspection import NodeDetail, Shown
from core.engine.live import LiveHub, changes
from core.errors import BatonError, RunNotFound
from core.principals import AGENT_PREFIX
from core.render import TEMPLATES, duration, render_text
from core.store.records import Run

log = logging.getLogger("baton.web")
WEB_TEMPLATES = TEMPLATES / "web"
FLASH = "baton_flash"
COMMENT_LIMIT = 2000


class Refused(Exception):
    """Nothing shown: `reason` (worded by `refused.html.j2`) and what it names (`data`)."""

    def __init__(self, status: int, reason: str, **data: str | None) -> None:
        super().__init__(reason)
        self.status, self.reason, self.data = status, reason, data


def html_environment(root: Path = WEB_TEMPLATES) -> Environment:
    env = Environment(loader=FileSystemLoader(str(root)), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(duration=duration, tojson_attr=lambda v: json.dumps(v, separators=(",", ":")))
    return env


class RunPagesApp:
    """The routes, over the assembled runtime's parts (`page_view.Parts`) and handler."""

    def __init__(self, *, parts: page_view.Parts, handler: Handler, links: PageLinks, hub: LiveHub,
                 csrf: Csrf, agents: frozenset[str]) -> None:
        self.parts = parts
        #: the agents configured now (`Settings.agents`): a link made for any other `mcp:` principal
        #: (its token since removed from BATON_MCP_TOKENS) opens nothing, though still signed
        self.agents = agents
        self.handler = handler
        self.links = links
        self.hub = hub
        self.csrf = csrf
        self.env = html_environment()

    def asgi(self) -> Starlette:
        routes: list[BaseRoute] = [
            Route("/r/{token}", self.run_page),
            Route("/r/{token}/events", self.events),
            Route("/r/{token}/group/{state}", self.group),
            Route("/r/{token}/graph", self.graph),
            Route("/r/{token}/nodes/{node}/output", self.output),
            Route("/r/{token}/nodes/{node}/artifacts/{path:path}", self.artifact),
            Route("/r/{token}/decide", self.decide, methods=["POST"]),
            Route("/c/{token}", self.runs_page),
            Mount("/static", StaticFiles(directory=str(WEB_TEMPLATES / "static")), name="static"),
        ]
        app = Starlette(routes=routes, exception_handlers={Refused: self._refused, 404: self._missing,
                                                            405: self._missing})
        app.add_middleware(SecurityHeaders)
        return app

    # -- pieces --------------------------------------------------------------------------
    def _html(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        page = self.env.get_template(template).render(**context)
        return HTMLResponse(self.parts.redactor.redact(page), status_code=status)

    async def _refused(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Refused)
        return self._html("refused.html.j2", exc.status, reason=exc.reason, **exc.data)

    async def _missing(self, request: Request, exc: Exception) -> Response:
        return self._html("refused.html.j2", 404, reason="missing")

    def _note(self, note: str) -> str:
        """A note of the page's own (`note.txt.j2`), as plain text."""
        return self.env.get_template("note.txt.j2").render(note=note).strip()

    def _grant(self, kind: str, token: str) -> Grant:
        try:
            grant = self.links.verify(kind, token)
        except LinkRefused as exc:
            if exc.expired:
                raise Refused(403, "link_expired", run_id=exc.run_id) from exc
            raise Refused(403, "link_invalid") from exc
        if grant.uid.startswith(AGENT_PREFIX) and grant.uid not in self.agents:
            raise Refused(403, "agent_revoked")
        return grant

    def _run(self, token: str) -> tuple[Grant, Run]:
        grant = self._grant(RUN, token)
        try:
            run = self.parts.store.runs.get_run(grant.run_id or "")
        except RunNotFound as exc:
            raise Refused(404, "no_run") from exc
        approvers = authz.gate_approvers(self.parts.catalog, run)  # who may decide may read it
        if not authz.may_view(self.parts.access, grant.uid, run, approvers):
            raise Refused(403, "not_yours")
        return grant, run

    # -- reading -------------------------------------------------------------------------
    def run_page(self, request: Request) -> Response:
        token = request.path_params["token"]
        grant, run = self._run(token)
        try:
            page = max(1, int(request.query_params.get("page", "1")))
        except ValueError:
            page = 1
        query = request.query_params.get("q", "").strip()[:200]
        node = request.query_params.get("node") or None
        group = request.query_params.get("group") or None
        data = page_view.run_page(self.parts, run, grant.uid, layout, query=query, node=node, page=page,
                                  group=group, show_graph=request.query_params.get("graph") == "1")
        rows = [r for g in data["groups"] for r in g["rows"]]
        pages = self._related_pages(run, rows, grant.uid, grant.expires_at)
        cookie = request.cookies.get(COOKIE) or self.csrf.new_cookie()
        form_id = self.csrf.new_form_id()
        flash = read_flash(request.cookies.get(FLASH, ""))
        response = self._html(
            "run.html.j2", **data, token=token, base=f"/{RUN}/{token}", user=grant.uid,
            expires=page_view.when(grant.expires_at), form_id=form_id,
            csrf=self.csrf.field(cookie, token, form_id), flash=self.parts.redactor.redact(flash),
            runs_url=self.links.runs_path(run.platform, run.conversation, grant.uid, grant.expires_at),
            run_pages=pages, parent=run.parent_run,
        )
        response.set_cookie(COOKIE, cookie, httponly=True, samesite="strict", secure=self.csrf.secure,
                            path="/")
        if flash:
            response.delete_cookie(FLASH, path="/")
        log.info("run page", extra={"action": "web_page", "run_id": run.id, "user": grant.uid})
        return response

    def group(self, request: Request) -> Response:
        """A big run's group of node rows (`<tr>`s), for its page: the same link, the same checks."""
        grant, run = self._run(request.path_params["token"])
        state = request.path_params["state"]
        if state not in {str(s) for s in page_view.STATE_ORDER}:
            raise Refused(404, "no_group")
        data = page_view.group_rows(self.parts, run, state)
        pages = self._related_pages(run, data["rows"], grant.uid, grant.expires_at)
        return self._html("_group.html.j2", **data, run_pages=pages)

    def _related_pages(self, run: Run, rows: list[dict[str, Any]], uid: str,
                       expires_at: float) -> dict[str, str]:
        """The page links of the child runs `rows` name and of `run`'s parent, for `uid`."""
        related = {r["child"] for r in rows if r.get("child")}
        related |= {run.parent_run} if run.parent_run else set()
        return {rid: self.links.run_path(rid, uid, expires_at) for rid in related}

    def graph(self, request: Request) -> Response:
        """A big run's graph (an SVG), for its page: the same link, the same checks."""
        token = request.path_params["token"]
        _, run = self._run(token)
        data = page_view.graph(self.parts, run, layout)
        return self._html("_dag.html.j2", **data, base=f"/{RUN}/{token}")

    def runs_page(self, request: Request) -> Response:
        grant = self._grant(RUNS, request.path_params["token"])
        platform, conversation = grant.platform or "", grant.conversation or ""
        runs = page_view.runs_page(self.parts, grant.uid, platform, conversation)
        items = [{"id": r.id, "workflow": r.workflow, "status": str(r.status), "requester": r.requester,
                  "created": page_view.when(r.created_at),
                  "url": self.links.run_path(r.id, grant.uid, grant.expires_at)} for r in runs]
        return self._html("runs.html.j2", runs=items, user=grant.uid, conversation=conversation,
                          platform=platform, expires=page_view.when(grant.expires_at))

    def _detail_of(self, run: Run, node: str) -> NodeDetail | None:
        """One node's detail (the run's other nodes are not built)."""
        return self.parts.engine.inspect(run, plan=False, shown=Shown(frozenset(), node)).node(node)

    def _node_output(self, run: Run, node: str) -> bytes:
        found = self._detail_of(run, node)
        if found is None or found.output_digest is None:
            raise Refused(404, "no_output", node=node, run=run.id)
        return self.parts.store.blobs.get_blob(found.output_digest)

    def output(self, request: Request) -> Response:
        _, run = self._run(request.path_params["token"])
        node = request.path_params["node"]
        text = self.parts.redactor.redact(page_view.decode(self._node_output(run, node)))
        return PlainTextResponse(text, headers=_attachment(f"{run.id}-{node}-output.txt"))

    def artifact(self, request: Request) -> Response:
        _, run = self._run(request.path_params["token"])
        node, path = request.path_params["node"], request.path_params["path"]
        found = self._detail_of(run, node)
        digest = found.artifacts.get(path) if found is not None else None
        if digest is None:
            raise Refused(404, "no_artifact", node=node, path=path, run=run.id)
        data = self.parts.redactor.redact_bytes(self.parts.store.blobs.get_blob(digest))
        name = f"{run.id}-{node}-{Path(path).name}"
        return Response(data, media_type="application/octet-stream", headers=_attachment(name))

    async def events(self, request: Request) -> Response:
        grant, run = await asyncio.to_thread(self._run, request.path_params["token"])
        return StreamingResponse(self._stream(run.id, grant), media_type="text/event-stream",
                                 headers={"X-Accel-Buffering": "no"})

    async def _stream(self, run_id: str, grant: Grant) -> AsyncIterator[str]:
        yield "retry: 2000\n\n"
        sent: dict[str, list[Any]] = {}
        rev: Any = None
        async for state in self.hub.updates(run_id):
            if time.time() >= grant.expires_at:
                yield "event: expired\ndata: {}\n\n"
                return
            if state is None:
                yield ": ping\n\n"
                continue
            update = changes(state, sent, rev)
            sent, rev = dict(state["nodes"]), state["rev"]
            if update is not None:
                yield f"event: update\ndata: {json.dumps(update, separators=(',', ':'))}\n\n"

    # -- deciding ------------------------------------------------------------------------
    async def decide(self, request: Request) -> Response:
        token = request.path_params["token"]
        grant, run = await asyncio.to_thread(self._run, token)
        form = await request.form()
        names = ("form", "csrf", "decision", "node", "question", "comment")
        fields = {k: str(form.get(k, "")) for k in names}
        if not self.csrf.check(request, token, fields["form"], fields["csrf"]):
            raise Refused(403, "form_expired")
        decision = fields["decision"] if fields["decision"] in ("approve", "reject") else None
        if decision is None:
            raise Refused(400, "no_decision")
        if await asyncio.to_thread(page_view.question_changed, self.parts, run, fields["node"],
                                   fields["question"]):
            return self._back(token, self._note("question_changed"))
        comment = " ".join(fields["comment"].split())[:COMMENT_LIMIT]
        platform, _, user = grant.uid.partition(":")
        origin = ChatMessage(platform=platform, conversation=run.conversation, user=user, text="",
                             event_id=f"web:{fields['form']}:{decision}", thread=run.thread)
        ballot = Ballot(grant.uid, run.id, decision, comment, source=Source.PAGE, node=fields["node"] or None)
        try:
            answers = await self.handler.decide(ballot, origin)
        except BatonError as exc:
            return self._back(token, exc.message)
        self.hub.poke(run.id)  # a vote that does not yet decide the gate still changes its panel
        for reply in answers:
            if not reply.is_error:  # the decision is told where the run lives
                await self.handler.announce(reply.at(
                    platform=run.platform, conversation=run.conversation, thread=run.thread,
                ).sent(ephemeral=False))
        hide = self.parts.redactor
        said = "\n".join(render_text(r, "console", hide) for r in answers) or self._note("already_handled")
        log.info("decided on the run page", extra={"action": "web_decide", "run_id": run.id,
                                                      "user": grant.uid, "decision": decision})
        return self._back(token, said)

    def _back(self, token: str, note: str) -> Response:
        response = RedirectResponse(f"/{RUN}/{token}#gates", status_code=303)
        value = base64.urlsafe_b64encode(self.parts.redactor.redact(note)[:COMMENT_LIMIT].encode()).decode()
        response.set_cookie(FLASH, value, max_age=120, httponly=True, samesite="strict",
                            secure=self.csrf.secure, path="/")
        return response


def read_flash(value: str) -> str:
    """The note a decision left for the page it returns to (shown escaped, never trusted)."""
    try:
        return base64.urlsafe_b64decode(value.encode("ascii")).decode("utf-8")[:COMMENT_LIMIT]
    except (ValueError, UnicodeError):
        return ""


def _attachment(name: str) -> dict[str, str]:
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)[:120]
    return {"Content-Disposition": f'attachment; filename="{safe}"'}
