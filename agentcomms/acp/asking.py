"""What the gateway hears of a process agent: its permission requests, answered through
agentcomms' approvals, and its turns, whose replies go back to the chat that asked.

The agent's `session/request_permission` names a tool call and the options the agent offers
(allow once, allow always, reject…). The never-list is asked first, here, before any human:
a call it refuses is answered with the agent's reject option at once. Anything else opens an
approval on the gateway (as an agent's hook does), with the agent's own options as the answers
every surface offers; the human's choice goes back as the option's id. Nothing is ever allowed
by default: a denial, a timeout, the gateway unreachable all answer with a reject option.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentcomms.acp.client import PermissionAsk, PermissionOption, Update
from agentcomms.acp.runner import Turn
from agentcomms.agents.never import human_rules, matches
from agentcomms.client import GatewayClient
from agentcomms.errors import RpcError
from agentcomms.errors.gateway import GatewayError, GatewayUnavailable

log = logging.getLogger(__name__)

KIND = "acp"
# One long-poll of the approval; the gateway answers "open" after it and it is asked again.
POLL_S = 25.0
# ACP's kinds of tool call, as the never-list's tools name them (its rules are written in Claude
# Code's names: `Bash(rm -rf *)`, `Edit(/etc/*)`, `WebFetch(domain:x)`).
_TOOLS = {"execute": "Bash", "edit": "Edit", "delete": "Edit", "move": "Edit", "read": "Read"}
_TOOLS |= {"fetch": "WebFetch", "search": "Grep"}
# A worker reaches the gateway only through its socket, on another machine too (the worker's
# own config names it): what to do when it cannot.
FAR_HOST = (
    "On a host other than the gateway's, set server.socket_path in this host's config to the "
    "gateway's socket as this host reaches it (e.g. forwarded with `ssh -N -L "
    "~/.agentcomms/gateway.sock:/home/me/.agentcomms/daemon.sock gateway-host`)"
)


def as_tool_call(ask: PermissionAsk) -> tuple[str, dict[str, Any]]:
    """The call as the never-list and the approval show it: a tool name, and its input."""
    call = ask.tool_call
    raw = call.get("rawInput")
    tool_input: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {}
    tool = _TOOLS.get(str(call.get("kind") or ""), ask.title)
    if tool == "Bash" and not isinstance(tool_input.get("command"), str):
        tool_input["command"] = ask.title  # Gemini and others put the line in the title
    locations = call.get("locations")
    if isinstance(locations, list) and locations and isinstance(locations[0], dict):
        path = locations[0].get("path")
        if isinstance(path, str) and "file_path" not in tool_input:
            tool_input["file_path"] = path
    return tool, tool_input


def refused_by(rules: Sequence[str], ask: PermissionAsk, cwd: str) -> str | None:
    """The never-list's rule that refuses this call, if one does."""
    tool, tool_input = as_tool_call(ask)
    return next((r for r in rules if matches(r, tool, tool_input, cwd=cwd)), None)


def reject_option(options: Sequence[PermissionOption]) -> str | None:
    """The agent's option that rejects this call only (else any reject); None: the request is
    answered "cancelled", which ends the turn."""
    for kind in ("reject_once", "reject_always"):
        found = next((o.option_id for o in options if o.kind == kind), None)
        if found is not None:
            return found
    return None


class Approvals:
    """Asks the human through the gateway's approvals; one per host's worker."""

    def __init__(self, socket: Path, never: Callable[[str], list[str]], home: Path) -> None:
        self._socket = socket
        self._never = never  # the config's never-list of an agent: everyone's and its own
        self._home = home

    def rules(self, agent_id: str) -> list[str]:
        """What `install` writes into a pane agent's hooks: the config's, and the human's own
        commands and agentcomms' folder."""
        return [*self._never(agent_id), *human_rules(str(self._home))]

    async def ask(self, agent_id: str, ask: PermissionAsk, cwd: str) -> str | None:
        rule = refused_by(self.rules(agent_id), ask, cwd)
        if rule is not None:
            log.warning(
                "%s: %s refused by the never-list (%s), no one asked", agent_id, ask.title, rule
            )
            return reject_option(ask.options)
        try:
            return await self._asked(agent_id, ask)
        # An error reply (the gateway refusing the request) rejects it too: nobody was asked.
        except (GatewayUnavailable, GatewayError, RpcError, OSError) as exc:
            log.warning(
                "%s: could not ask about %s: %s; rejected. %s", agent_id, ask.title, exc, FAR_HOST
            )
            return reject_option(ask.options)

    async def _asked(self, agent_id: str, ask: PermissionAsk) -> str | None:
        tool, tool_input = as_tool_call(ask)
        names = _labels(ask.options)
        async with GatewayClient(self._socket) as gateway:
            opened = await gateway.call(
                "approval_open",
                kind=KIND,
                agent_id=agent_id,
                tool_name=tool[:200],
                tool_input=tool_input,
                options=list(names),
            )
            approval_id = opened["id"]
            try:
                while True:
                    waited = await gateway.call("approval_wait", id=approval_id, wait_s=POLL_S)
                    if waited["status"] == "decided":
                        break
            except asyncio.CancelledError:
                # The turn was cancelled under the request: the approval is no longer asked.
                await asyncio.shield(
                    gateway.call("approval_decide", id=approval_id, behavior="terminal")
                )
                raise
        decision = waited.get("decision") or {}
        answer = decision.get("answer")
        if decision.get("behavior") == "allow" and isinstance(answer, str):
            return names.get(answer) or reject_option(ask.options)
        return reject_option(ask.options)


def _labels(options: Sequence[PermissionOption]) -> dict[str, str]:
    """Each option's label as a person picks it (its name, numbered if two share one) -> its id."""
    labels: dict[str, str] = {}
    for n, option in enumerate(options, 1):
        label = option.name.strip() or option.option_id
        labels[label if label not in labels else f"{n}. {label}"] = option.option_id
    return labels


# How long a turn's updates gather before they go to the gateway together (a page shows them
# this late at most; a chunk a word long is not a socket call of its own).
GATHER_S = 0.2
# What one batch carries of a text, and of a tool's title.
TEXT_CHARS = 20_000
TITLE_CHARS = 300


def shown(update: Update) -> dict[str, Any] | None:
    """What the console shows of one update of a turn: a chunk of the reply (or of a thought),
    a tool call as it goes (its title and status), the plan; None for the rest."""
    raw = update.raw
    if update.kind in ("agent_message_chunk", "agent_thought_chunk"):
        kind = "text" if update.kind == "agent_message_chunk" else "thought"
        return {"kind": kind, "text": update.text} if update.text else None
    if update.kind in ("tool_call", "tool_call_update"):
        tool: dict[str, Any] = {"kind": "tool", "id": str(raw.get("toolCallId") or "")[:100]}
        for key in ("title", "status"):
            if isinstance(raw.get(key), str):
                tool[key] = raw[key][:TITLE_CHARS]
        return tool
    if update.kind == "plan" and isinstance(raw.get("entries"), list):
        entries = [e.get("content") for e in raw["entries"] if isinstance(e, dict)]
        return {"kind": "plan", "entries": [e[:TITLE_CHARS] for e in entries if isinstance(e, str)]}
    return None


# A worker may start its agents before the gateway beside it listens (`up` with its own
# Temporal starts the worker first): the gateway is told as soon as it does.
TELL_TRIES = 30
TELL_FIRST_S = 0.2
TELL_CAP_S = 5.0


class StartsToGateway:
    """Tells the gateway each process agent's process as the worker starts it, and again as it
    asks a permission (the kernel confirms it is this worker's child): what the agent runs then
    counts as the agent's, never as the human's. A gateway not told refuses the human's
    decisions while the agent runs, so the agent never waits long on this; a gateway not yet
    listening is told when it is, and one that refused (it runs on another host, where it
    cannot see this one's processes) is not told again."""

    def __init__(self, socket: Path) -> None:
        self._socket = socket
        self._telling: set[asyncio.Task[None]] = set()
        self._refused: set[tuple[str, int]] = set()

    async def __call__(self, agent_id: str, pid: int) -> None:
        if (agent_id, pid) in self._refused:
            return
        # Told at once where the gateway listens, so it knows before the agent's state says
        # ready; only a gateway not yet there is waited for, beside the agent.
        if await self._told(agent_id, pid):
            return
        task = asyncio.get_running_loop().create_task(self._tell_later(agent_id, pid))
        self._telling.add(task)
        task.add_done_callback(self._telling.discard)

    async def _told(self, agent_id: str, pid: int) -> bool:
        """Whether the gateway heard it (or refused it: no use telling again)."""
        try:
            async with asyncio.timeout(TELL_CAP_S), GatewayClient(self._socket) as gateway:
                await gateway.call("agent_process", agent_id=agent_id, pid=pid)
        except (GatewayError, RpcError) as exc:  # refused: not confirmed (another host's)
            self._refused.add((agent_id, pid))
            log.warning("%s: the gateway refused its process %d: %s", agent_id, pid, exc)
        except (GatewayUnavailable, OSError, TimeoutError):
            return False
        return True

    async def _tell_later(self, agent_id: str, pid: int) -> None:
        delay = TELL_FIRST_S
        for _ in range(TELL_TRIES):
            await asyncio.sleep(delay)
            if await self._told(agent_id, pid):
                return
            delay = min(delay * 2, TELL_CAP_S)
        log.warning("%s: the gateway never heard of its process %d", agent_id, pid)


class TurnsToGateway:
    """Tells the gateway a process agent's turns as a pane agent's hooks do, so the gateway's
    observers hear them: the mirror sends the turn's reply to the chat whose message began it,
    the projection keeps its beginning and end, and the console shows it as it streams
    (``TurnUpdate``, its updates gathered a moment). One agent's are told one at a time, in
    order: a page never shows a turn's end before its last words."""

    def __init__(self, socket: Path, *, gather_s: float = GATHER_S) -> None:
        self._socket = socket
        self._gather_s = gather_s
        self._gathered: dict[str, list[dict[str, Any]]] = {}
        self._order: dict[str, asyncio.Lock] = {}
        self._sending: set[asyncio.Task[None]] = set()

    def updated(self, agent_id: str, update: Update) -> None:
        """An update of the agent's turn (an observer of its runner), told a moment later."""
        item = shown(update)
        if item is None:
            return
        gathered = self._gathered.setdefault(agent_id, [])
        if not gathered:
            task = asyncio.get_running_loop().create_task(self._later(agent_id))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)
        last = gathered[-1] if gathered else None
        if last is not None and last["kind"] == item["kind"] and "text" in item:
            last["text"] = (last["text"] + item["text"])[:TEXT_CHARS]  # one chunk of many
        else:
            gathered.append(item)

    async def __call__(self, agent_id: str, event: str, turn: Turn) -> None:
        # The messages it carried and its session: its events say which turn was whose.
        payload: dict[str, Any] = {"event_ids": turn.event_ids, "session_id": turn.session_id}
        if event == "TurnStart":
            payload["prompt"] = turn.prompt
        else:
            payload |= {"reply": turn.reply_text(), "stop_reason": turn.stop_reason}
            payload["error"] = turn.error
        async with self._in_order(agent_id):
            await self._flush(agent_id)
            await self._tell(agent_id, event, payload, turn.session_id)

    async def _later(self, agent_id: str) -> None:
        await asyncio.sleep(self._gather_s)
        async with self._in_order(agent_id):
            await self._flush(agent_id)

    async def _flush(self, agent_id: str) -> None:
        updates = self._gathered.pop(agent_id, None)
        if updates:
            await self._tell(agent_id, "TurnUpdate", {"updates": updates}, None)

    def _in_order(self, agent_id: str) -> asyncio.Lock:
        return self._order.setdefault(agent_id, asyncio.Lock())

    async def _tell(
        self, agent_id: str, event: str, payload: dict[str, Any], session_id: str | None
    ) -> None:
        try:
            async with GatewayClient(self._socket) as gateway:
                await gateway.call(
                    "agent_hook",
                    kind=KIND,
                    event=event,
                    agent_id=agent_id,
                    session_id=session_id,
                    at_ns=time.time_ns(),
                    payload=payload,
                )
        except (GatewayUnavailable, GatewayError, RpcError, OSError) as exc:
            log.warning(
                "%s: the gateway did not hear its %s: %s. %s", agent_id, event, exc, FAR_HOST
            )
