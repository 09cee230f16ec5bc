"""The console's routes: the agents page, an agent's page, a trace, a page's event stream, and
the POSTs that answer an approval, send a message, interrupt, clear or stop an agent, or start a
new one.

Each change goes through the gateway's own path: a message, an interrupt, a new session or a
stop through the socket methods `agentcomms send`, `interrupt`, `agents clear` and `agents stop`
call (:class:`gateway.messages.methods.Methods`, :class:`gateway.agents.processes.ProcessAgentMethods`),
an answer through the approvals' one decide path (:class:`gateway.approvals.methods.ApprovalMethods`, via
``console``), so the first answer wins and every other surface hears of it; a new agent through
the checks a chat's /new goes through (:class:`gateway.agents.starting.NewAgents`).
"""

from __future__ import annotations

import asyncio
import getpass
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.responses import StreamingResponse as Streaming
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

import gateway.console.pages as pages
from agentcomms.approval_models import Behavior
from agentcomms.console_sessions import SESSION_TTL_S
from agentcomms.errors import RpcError
from agentcomms.ids import check_agent_id
from agentcomms.models import Event
from agentcomms.store import Store
from agentcomms.voice.audio import AudioStore
from agentcomms.voice.models import check_audio_name
from gateway.agents.hosts import HostWatch, hosts_down
from gateway.agents.processes import ProcessAgentMethods
from gateway.agents.starting import DEFAULT_KIND, NewAgents
from gateway.approvals.methods import ApprovalMethods
from gateway.approvals.words import nothing_ticked
from gateway.console.access import CSRF_FIELD, Access
from gateway.console.feed import LATE_SEQS, Change, Feed, with_waiting
from gateway.console.stream import Shown, told
from gateway.console.turns import LiveTurns
from gateway.messages.methods import Methods
from gateway.socket.caller import THE_CONSOLE
from gateway.socket.protocol import INVALID_PARAMS
from gateway.socket.results import agent_json
from gateway.socket.table import MethodTable
from workflows.mailbox.client import Mailbox

STATIC = Path(__file__).parent / "static"
HEADERS = {
    # Only this console's own script and styles run in its pages; no other site frames them.
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "X-Frame-Options": "DENY",
    # "no-referrer" would make a browser send `Origin: null` with the page's own forms.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}
BEHAVIORS: dict[str, Behavior] = {
    "allow": "allow",
    "allow_session": "allow_session",
    "deny": "deny",
    "answer": "answer",
}
# An agent page's buttons, each the socket method it calls.
ACTIONS: dict[str, Callable[..., Awaitable[Any]]] = {
    "interrupt": Methods.interrupt,
    "clear": ProcessAgentMethods.clear_agent,
    "stop": ProcessAgentMethods.stop_agent,
}
TIMELINE = 100
CALLS = 50
# A page's stream says it is alive this often, so proxies and browsers keep it open for days.
KEEPALIVE_S = 15.0
SENT_WAIT_S = 20.0

Handler = Callable[[Request], Awaitable[Response]]


class ConsoleApp:
    def __init__(
        self,
        access: Access,
        feed: Feed,
        store: Store,
        methods: MethodTable,
        approvals: ApprovalMethods,
        mailbox: Mailbox,
        audio: AudioStore,
        hosts: HostWatch,
        shared_queue: str,
        turns: LiveTurns,
        new_agents: NewAgents,
    ) -> None:
        self._shared_queue = shared_queue
        self._turns = turns
        self._new_agents = new_agents
        self._audio = audio
        self._hosts = hosts
        self._access = access
        self._feed = feed
        self._methods = methods
        self._approvals = approvals
        self._mailbox = mailbox
        self._store = store

    def routes(self) -> list[BaseRoute]:
        guarded = self._admitted
        return [
            Route("/", self.home),
            Route("/agents/{agent_id}", guarded(self.agent_page)),
            Route("/inbox", guarded(self.inbox_page)),
            Route("/calls", guarded(self.calls_page)),
            Route("/calls/{call_id}/audio/{file}", guarded(self.call_audio)),
            Route("/hosts", guarded(self.hosts_page)),
            Route("/doctor", guarded(self.doctor_page)),
            Route("/trace/{event_id}", guarded(self.trace_page)),
            Route("/stream", guarded(self.stream)),
            Route("/approvals/{approval_id}", self._changes(self.decide), methods=["POST"]),
            Route("/new-agent", self._changes(self.new_agent), methods=["POST"]),
            Route("/agents/{agent_id}/send", self._changes(self.send), methods=["POST"]),
            Route("/agents/{agent_id}/{action}", self._changes(self.act), methods=["POST"]),
            Route("/agents/{agent_id}/sent/{event_id}", guarded(self.sent)),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]

    # ---- who may ----------------------------------------------------------------------------

    def _admitted(self, handler: Handler) -> Handler:
        async def checked(request: Request) -> Response:
            if not self._access.admitted(request):
                return _locked()
            return await handler(request)

        return checked

    def _changes(
        self, handler: Callable[[Request, dict[str, str]], Awaitable[Response]]
    ) -> Handler:
        """A POST from one of the console's own pages: the cookie and the form's field."""

        async def checked(request: Request) -> Response:
            if not self._access.admitted(request):
                return _locked()
            body = (await request.body()).decode("utf-8", "replace")
            form = {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}
            given = form.get(CSRF_FIELD) or request.headers.get("x-csrf-token")
            if not self._access.form_is_ours(given):
                return _said("forbidden: this form did not come from the console", 403)
            try:
                return await handler(request, form)
            except RpcError as exc:
                if _wants_json(request):
                    return JSONResponse({"error": exc.message}, 400, headers=HEADERS)
                return _said(exc.message, 400)

        return checked

    async def home(self, request: Request) -> Response:
        given = request.query_params.get("t")
        if given is not None:
            if not self._access.matches(given):
                return _locked()
            # The token leaves the address at once: no history entry or page keeps it. The
            # cookie outlives the browser's session (a page left open for days, a browser
            # restarted under it) as long as the session it holds.
            moved = RedirectResponse("/", 303, headers=HEADERS)
            moved.set_cookie(
                self._access.cookie,
                self._access.open_session(),
                max_age=SESSION_TTL_S,
                httponly=True,
                samesite="strict",
                path="/",
            )
            return moved
        if not self._access.admitted(request):
            return _locked()
        return await self.agents_page(request)

    # ---- pages ------------------------------------------------------------------------------

    async def agents_page(self, request: Request) -> Response:
        # The stream replays from here, so every read after it is at least this new.
        seq = await self._store.last_seq()
        # Independent reads (the projection's, Temporal's) wait side by side, not in turn.
        agents, last, replies, approvals = await asyncio.gather(
            self._methods.call_declared(Methods.agents, {"include_offline": True}, THE_CONSOLE),
            self._store.last_event_times(),
            self._store.last_replies(),
            self._approvals.open_views(),
        )
        listed = agents["agents"]
        html = pages.render(
            "agents.html",
            agents=listed,
            rows=pages.agent_rows(
                listed,
                {a: pages.clock(t) for a, t in last.items()},
                {a: pages.reply_text(e) for a, e in replies.items()},
            ),
            hosts_down=hosts_down(listed),
            approvals=approvals,
            # The New agent form: folders under acp.roots, the kinds one may name.
            roots=await self._new_agents.roots(),
            kinds=self._new_agents.kinds(),
            default_kind=DEFAULT_KIND,
            # The filter's words, kept in the address so a reload keeps them (the page narrows).
            q=request.query_params.get("q", ""),
            **self._page_context(seq),
        )
        return _page(html)

    async def agent_page(self, request: Request) -> Response:
        agent_id = request.path_params["agent_id"]
        seq = await self._store.last_seq()
        row = await self._store.get_agent(agent_id)
        if row is None:
            return _said(f"no agent {agent_id!r}; the agents page lists them", 404)
        events = await self._store.latest_events(agent_id, TIMELINE)
        views = [v for v in await self._approvals.open_views() if v.request.agent_id == agent_id]
        html = pages.render(
            "agent.html",
            agent=agent_json(row),
            approvals=views,
            timeline=[(e, pages.clock(e.created_at)) for e in events],
            turn=self._turns.turns.get(agent_id),
            back=f"/agents/{agent_id}",
            **self._page_context(seq, agent_id),
        )
        return _page(html)

    async def inbox_page(self, request: Request) -> Response:
        """What agents said to the human here (the local channel), newest first."""
        seq = await self._store.last_seq()
        inbox = await self._methods.call_declared(Methods.inbox, {"limit": TIMELINE}, THE_CONSOLE)
        said = inbox["messages"]
        events = [Event.model_validate(m) for m in reversed(said)]
        html = pages.render(
            "inbox.html",
            timeline=[(e, pages.clock(e.created_at)) for e in events],
            **self._page_context(seq, inbox=True),
        )
        return _page(html)

    async def calls_page(self, request: Request) -> Response:
        """The newest calls, out and in, each with its transcript and its sound, turn by turn."""
        calls = await self._store.list_calls(limit=CALLS)
        shown = [(c, self._audio.transcript(c.id)) for c in calls]
        return _page(pages.render("calls.html", calls=shown, **self._page_context(None)))

    async def call_audio(self, request: Request) -> Response:
        """One sound of one call, from the audio directory (the call must be in the projection,
        and the name can never leave the directory)."""
        call_id, file = request.path_params["call_id"], request.path_params["file"]
        try:
            name = check_audio_name(f"{call_id}/{file}")
        except ValueError:
            return _said("not a call's sound", 404)
        path = self._audio.path(name)
        if await self._store.get_call(call_id) is None or not path.is_file():
            return _said(f"no sound {name!r}; the calls page lists them", 404)
        media = "audio/mpeg" if path.suffix == ".mp3" else "audio/wav"
        return FileResponse(path, media_type=media, headers=HEADERS)

    async def hosts_page(self, request: Request) -> Response:
        """Each host: whether a worker polls its queue, its agents, what waits for them."""
        agents = await self._store.list_agents(include_offline=True)
        hosts, shared = await asyncio.gather(
            self._hosts.survey(agents), self._hosts.polls(self._shared_queue)
        )
        html = pages.render(
            "hosts.html",
            hosts=hosts,
            shared_queue=self._shared_queue,
            shared=shared,
            silence_s=self._hosts.silence_s,
            **self._page_context(None),
        )
        return _page(html)

    async def doctor_page(self, request: Request) -> Response:
        """`agentcomms doctor`'s checks, run now, one line each with what to do."""
        from agentcomms.cli.doctor import run_checks

        checks = await run_checks()
        return _page(pages.render("doctor.html", checks=checks, **self._page_context(None)))

    async def trace_page(self, request: Request) -> Response:
        event_id = request.path_params["event_id"]
        try:
            trace = await self._methods.call_declared(
                Methods.trace, {"event_id": event_id}, THE_CONSOLE
            )
        except RpcError as exc:
            return _said(exc.message, 404)
        return _page(pages.render("trace.html", trace=trace, **self._page_context(None)))

    def _page_context(
        self, seq: int | None, agent_id: str | None = None, *, inbox: bool = False
    ) -> dict[str, Any]:
        stream = "" if seq is None else f"/stream?seq={seq}&since={_now().isoformat()}"
        if agent_id and stream:
            stream += f"&agent={agent_id}"
        if inbox and stream:
            stream += "&inbox=1"
        return {"csrf": self._access.csrf, "stream": stream}

    # ---- changes ----------------------------------------------------------------------------

    async def decide(self, request: Request, form: dict[str, str]) -> Response:
        behavior = BEHAVIORS.get(form.get("behavior", ""))
        if behavior is None:
            return _said("behavior: expected allow, allow_session, deny or answer", 400)
        approval_id = request.path_params["approval_id"]
        # A question's answer: the option pressed, the options ticked, or the human's own words.
        if form.get("answer_own"):
            answer = form.get("answer_words")
        elif form.get("answer_ticked"):
            answer = await self._ticked(approval_id, form)
        else:
            answer = form.get("answer")
        result = await self._approvals.answer(
            approval_id,
            behavior,
            by=getpass.getuser(),
            via="console",
            message=form.get("message") or None,
            answer=answer or None,
            shown=form.get("request") or None,
        )
        if _wants_json(request):
            # The card as it stands now, for the page to show at once: answered here, or
            # already by someone else (a terminal, a chat, the clock), which the page's stream
            # may never tell (an approval that timed out with no hook left waiting).
            view = await self._approvals.view(approval_id)
            if view is not None:
                late = "" if result["accepted"] else " before your answer, which was not used"
                result["html"] = pages.approval(view, self._access.csrf, _back(form), late)
            return JSONResponse(result, headers=HEADERS)
        return RedirectResponse(_back(form), 303, headers=HEADERS)

    async def _ticked(self, approval_id: str, form: dict[str, str]) -> str | None:
        """The options ticked in a multi-select question's form (``tick1``, ``tick3``: their
        numbers), joined in the options' order as Done in a chat answers; None when the
        approval is gone or decided (the answer then says so)."""
        view = await self._approvals.view(approval_id)
        if view is None or not view.open:
            return None
        options = view.request.options
        ticked = [label for n, label in enumerate(options, 1) if form.get(f"tick{n}")]
        if not ticked:
            raise RpcError(INVALID_PARAMS, nothing_ticked(view.request.id))
        return ", ".join(ticked)

    async def new_agent(self, request: Request, form: dict[str, str]) -> Response:
        """The New agent form: an id, a folder under acp.roots and a kind, started headless as a
        chat's /new starts one."""
        agent_id, folder = form.get("agent_id", "").strip(), form.get("dir", "").strip()
        try:
            result, _ = await self._new_agents.start(agent_id, folder, form.get("kind", ""))
        except ValueError as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None
        page = f"/agents/{agent_id}"
        if _wants_json(request):
            return JSONResponse({**result, "page": page}, headers=HEADERS)
        return RedirectResponse(page, 303, headers=HEADERS)

    async def send(self, request: Request, form: dict[str, str]) -> Response:
        agent_id = _agent(request)
        params = {"agent_id": agent_id, "message": form.get("message", "")}
        result = await self._methods.call_declared(Methods.send, params, THE_CONSOLE)
        if _wants_json(request):
            return JSONResponse(result, headers=HEADERS)
        return RedirectResponse(f"/agents/{agent_id}", 303, headers=HEADERS)

    async def act(self, request: Request, form: dict[str, str]) -> Response:
        """An agent page's button: interrupt it, or, for a process agent, start a new session
        or stop it, each through its socket method."""
        agent_id = _agent(request)
        method = ACTIONS.get(request.path_params["action"])
        if method is None:
            return _said(f"no such action; an agent's are: {', '.join(ACTIONS)}", 404)
        result = await self._methods.call_declared(method, {"agent_id": agent_id}, THE_CONSOLE)
        if _wants_json(request):
            return JSONResponse(result, headers=HEADERS)
        return RedirectResponse(f"/agents/{agent_id}", 303, headers=HEADERS)

    async def sent(self, request: Request) -> Response:
        """Where a message sent from the composer is now: waits until it moves on (typed,
        submitted or failed), or answers `queued` after a while for the page to ask again."""
        outcome = await self._mailbox.wait_delivered(
            _agent(request), request.path_params["event_id"], SENT_WAIT_S
        )
        status = "submitted" if outcome.submitted else outcome.status
        return JSONResponse({"status": status, "error": outcome.error}, headers=HEADERS)

    # ---- the live stream --------------------------------------------------------------------

    async def stream(self, request: Request) -> Response:
        page = Shown(
            agent_id=request.query_params.get("agent"),
            inbox=request.query_params.get("inbox") == "1",
        )
        seq = _int(request.query_params.get("seq"))
        since = _time(request.query_params.get("since"))
        return Streaming(
            self._messages(page, seq, since, lambda: self._access.admitted(request)),
            media_type="text/event-stream",
            headers={**HEADERS, "X-Accel-Buffering": "no"},
        )

    async def _messages(
        self, page: Shown, seq: int, since: datetime, admitted: Callable[[], bool]
    ) -> AsyncIterator[str]:
        async with self._feed.listen() as changes:
            yield "retry: 1000\n\n"
            # What changed between the page's render and this stream: told again, harmlessly.
            changed = await self._store.agents_changed_since(since - timedelta(seconds=1))
            for agent in await with_waiting(self._store, changed):
                yield told(Change("agent", agent.id, agent=agent), page, self._access.csrf)
            for at, event in await self._store.events_after_seq(max(0, seq - LATE_SEQS), 300):
                yield told(
                    Change("event", event.agent_id, event=event, seq=at), page, self._access.csrf
                )
            while True:
                try:
                    change = await asyncio.wait_for(changes.get(), KEEPALIVE_S)
                except TimeoutError:
                    if not admitted():
                        # Its session revoked or ended: the page connects again, and is locked.
                        yield "event: again\ndata: {}\n\n"
                        return
                    yield ": still here\n\n"
                    continue
                if change is None:  # the gateway is closing, or the page fell behind
                    yield "event: again\ndata: {}\n\n"
                    return
                yield told(change, page, self._access.csrf)


def _page(html: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(html, status, headers=HEADERS)


def _said(message: str, status: int) -> PlainTextResponse:
    """An error in words, as text: what it names (an agent id, a path) is never markup."""
    return PlainTextResponse(message, status, headers=HEADERS)


def _locked() -> HTMLResponse:
    return _page(pages.render("locked.html"), 401)


def _wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def _agent(request: Request) -> str:
    agent_id: str = request.path_params["agent_id"]
    try:
        check_agent_id(agent_id)
    except ValueError as exc:
        raise RpcError(INVALID_PARAMS, f"agent: {exc}") from None
    return agent_id


def _back(form: dict[str, str]) -> str:
    back = form.get("back", "/")
    return back if back.startswith("/") and not back.startswith("//") else "/"


def _int(value: str | None) -> int:
    return int(value) if value and value.isdigit() else 0


def _now() -> datetime:
    from agentcomms.models import utcnow

    return utcnow()


def _time(value: str | None) -> datetime:
    try:
        return datetime.fromisoformat(value) if value else _now()
    except ValueError:
        return _now()
