"""Hook reports over loopback HTTP: what an agent's reporting hooks say, with no Python started.

Claude Code posts a hook's JSON to a URL (an ``"http"`` hook) instead of running a command; Codex
and Gemini CLI run a command, and the shell they start for it posts the JSON itself
(:mod:`agentcomms.agents.post_hook`). For the hooks that only report (state, prompts, tool use,
turn ends) that spares a Python process around every tool call. The listener binds loopback only and serves this one route: the hook's
token (``hook.token`` in the agentcomms home, written into the agent's settings, 0600) proves the
request is the user's own, the pane and the agent come in headers the agent fills from its
environment, and the Host is checked as on every HTTP door. The answer is immediate: the report
is stamped on arrival and handed to the mailbox in order behind the answer, so the agent never
waits on Temporal. A decision (a permission request) is never taken here; it stays a command
hook that fails closed.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from agentcomms.agents.hook import trimmed
from agentcomms.errors import RpcError
from gateway.agents.hooks import AgentHookMethods, AgentHookParams
from gateway.http import WebhookServer

log = logging.getLogger(__name__)

HOOK_PATH = "/agentcomms/hook/{kind}"
TOKEN_HEADER = "X-Agentcomms-Token"
PANE_HEADER = "X-Agentcomms-Pane"
TMUX_HEADER = "X-Agentcomms-Tmux"
AGENT_HEADER = "X-Agentcomms-Agent"
# When the hook started, by its own clock (ns): a report the agent did not wait for (Codex's
# background hooks) may arrive after a later one. Never later than its arrival, nor older than
# this: a report cannot hold back the ones after it.
AT_HEADER = "X-Agentcomms-At"
AT_OLDEST_NS = 60 * 1_000_000_000
# Events that decide (the agent reads the hook's answer): never answered over this door.
DECIDING = frozenset({"PermissionRequest"})
# Claude Code posts itself; Codex and Gemini CLI through the shell they start for a hook
# (agentcomms.agents.post_hook).
KINDS = ("claude-code", "codex", "gemini")
# Reports waiting for the mailbox: a burst of tool calls while Temporal is slow. Past it a report
# is dropped (the next one says the same state), never the agent held.
MAX_WAITING = 1000


class HookReports:
    """The loopback listener and the one task that hands its reports on, in arrival order."""

    def __init__(self, hooks: AgentHookMethods, token: str, port: int) -> None:
        self._hooks = hooks
        self._token = token.encode()
        self._waiting: asyncio.Queue[AgentHookParams] = asyncio.Queue(MAX_WAITING)
        self._task: asyncio.Task[None] | None = None
        self.server = WebhookServer(
            "127.0.0.1",
            port,
            [Route(HOOK_PATH, self.receive, methods=["POST"])],
            what="hook reports",
            settings="server.hook_port",
        )

    async def start(self) -> None:
        await self.server.start()
        self._task = asyncio.create_task(self._hand_on(), name="hook reports")

    async def close(self) -> None:
        await self.server.close()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def receive(self, request: Request) -> Response:
        at_ns = time.time_ns()  # first: the order of the agent's events is their arrival's
        given = request.headers.get(TOKEN_HEADER, "").encode()
        if not hmac.compare_digest(given, self._token):
            return PlainTextResponse("wrong or missing hook token", status_code=401)
        kind = request.path_params["kind"]
        if kind not in KINDS:
            return PlainTextResponse(f"no hook reports for {kind!r}", status_code=404)
        try:
            payload = json.loads(await request.body())
        except ValueError:
            return PlainTextResponse("the body is not JSON", status_code=400)
        if not isinstance(payload, dict):
            return PlainTextResponse("the body is not a JSON object", status_code=400)
        event = payload.get("hook_event_name")
        if not isinstance(event, str) or not event:
            return PlainTextResponse("no hook_event_name", status_code=400)
        if event in DECIDING:
            return PlainTextResponse(f"{event} is decided by a command hook", status_code=403)
        tmux = request.headers.get(TMUX_HEADER, "")
        session = payload.get("session_id")
        try:
            params = AgentHookParams(
                kind=kind,
                event=event,
                at_ns=hook_started_ns(request.headers.get(AT_HEADER), at_ns),
                agent_id=request.headers.get(AGENT_HEADER) or None,
                pane=request.headers.get(PANE_HEADER) or None,
                tmux_socket=tmux.split(",", 1)[0] or None,
                session_id=session if isinstance(session, str) else None,
                payload=trimmed(payload),
            )
        except ValidationError as exc:
            return PlainTextResponse(f"bad report: {exc.errors()[0]['msg']}", status_code=400)
        if params.agent_id is None and (params.pane is None or params.tmux_socket is None):
            return Response(status_code=204)  # not in tmux and not named: no agent to report for
        try:
            self._waiting.put_nowait(params)
        except asyncio.QueueFull:
            log.warning("hook reports: %d wait for the mailbox; dropped a %s", MAX_WAITING, event)
        return Response(status_code=204)

    async def _hand_on(self) -> None:
        while True:
            params = await self._waiting.get()
            try:
                await self._hooks.agent_hook(params)
            except RpcError as exc:
                # An agent in a pane never registered posts around every tool call: no news.
                log.debug("hook report %s not taken: %s", params.event, exc)
            except Exception:
                log.exception("hook report %s failed", params.event)


def hook_started_ns(given: str | None, arrived_ns: int) -> int:
    """When the hook started: its own stamp when it gave a plausible one, else its arrival."""
    if given is None or not given.isdigit():
        return arrived_ns
    stamped = int(given)
    return stamped if arrived_ns - AT_OLDEST_NS <= stamped <= arrived_ns else arrived_ns
