"""What a request that acts for an agent may ask: only what is that agent's own.

A request names its caller when it acts for an agent (the MCP server names the agent its bearer
token belongs to). Such a request reads and writes the agent's own mailbox, events and calls,
its own side of the terminal and of its talks with other agents, and its own chats: the chats
mapped to it in ``chat.channels`` and those its messages came from. Everything else, and every
method an agent has no use for (admitting chat senders, typing as the human, reading the
human's inbox), is refused before the method runs. A request without a caller is the human's:
the socket is the user's own (0600), so any process of that user may make one (README,
"Security").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agentcomms.config import Config
from agentcomms.errors import RpcError
from agentcomms.models import LOCAL_CHANNEL
from agentcomms.store import Store
from gateway.protocol import INVALID_PARAMS, NOT_YOURS

# The methods an agent may call, and the parameter that must name the agent itself.
_FOR_ITSELF: dict[str, str | None] = {
    "events": "agent_id",
    "check_messages": "agent_id",
    "wait_messages": "agent_id",
    "agent_message": "from_agent_id",
    "reply": "agent_id",
    "history": None,  # its own side of any channel, or the whole of a chat of its own
    "call": "agent_id",
    "call_say": "agent_id",
    "call_end": "agent_id",
    "calls": "agent_id",
}
# What the deployment looks like, which every agent may see: no message in it.
_OPEN = frozenset({"ping", "status", "agents", "channels"})
# Channels that hold many talks, not one chat: an agent reads only its own side of them.
_SHARED_PREFIXES = ("agent:",)

Dispatch = Callable[[str, dict[str, Any]], Awaitable[Any]]


class Confinement:
    """The socket's dispatch, with each request that acts for an agent confined to its own."""

    def __init__(self, cfg: Config, store: Store, dispatch: Dispatch) -> None:
        self._cfg = cfg
        self._store = store
        self._dispatch = dispatch

    async def dispatch(self, method: str, params: dict[str, Any], caller: str | None) -> Any:
        if caller is not None:
            await self.check(caller, method, params)
            if method == "events":
                # A stranger's refused message, or a forgery, is the human's to audit: its text
                # is not for the agent's eyes, whatever the request asked.
                params = params | {"rejected": False}
        return await self._dispatch(method, params)

    async def check(self, caller: str, method: str, params: dict[str, Any]) -> None:
        """Raise :class:`RpcError` ``NOT_YOURS`` unless the request is ``caller``'s own."""
        if method in _OPEN:
            return
        if method not in _FOR_ITSELF:
            raise RpcError(
                NOT_YOURS,
                f"{method} is not open to agents: this request acts for agent {caller!r}. "
                "Only the human runs it (with the agentcomms command).",
            )
        field = _FOR_ITSELF[method]
        if field is not None and (named := params.get(field)) != caller:
            raise RpcError(
                NOT_YOURS,
                f"{field}: {repr(named)[:80]} refused: this request acts for agent "
                f"{caller!r}, and an agent acts only for itself. Pass {field}={caller!r}.",
            )
        if method == "reply":
            channel = _channel(params)
            if channel != LOCAL_CHANNEL:  # the terminal: its own talk with its human
                await self._own_chat(caller, channel, "write to")
        elif method == "history" and params.get("agent_id") != caller:
            channel = _channel(params)
            if channel == LOCAL_CHANNEL or channel.startswith(_SHARED_PREFIXES):
                raise RpcError(
                    NOT_YOURS,
                    f"{channel} holds other agents' talks too: agent {caller!r} reads only its "
                    f"own side of it (agent_id={caller!r}).",
                )
            await self._own_chat(caller, channel, "read")

    async def _own_chat(self, caller: str, channel: str, doing: str) -> None:
        mapped = self._cfg.chat.channels.get(channel)
        if mapped == caller:
            return
        if not channel.startswith(_SHARED_PREFIXES) and await self._store.came_from(
            caller, channel
        ):
            return
        whose = f"it is mapped to agent {mapped!r}" if mapped else "it is mapped to no agent"
        raise RpcError(
            NOT_YOURS,
            f"agent {caller!r} may not {doing} {channel}: {whose}, and no message of "
            f"{caller!r}'s came from it. An agent reads and writes only its own chats: those "
            f'mapped to it in the config\'s chat.channels (add "{channel}": "{caller}" there '
            "and restart agentcomms) and those its messages came from.",
        )


def _channel(params: dict[str, Any]) -> str:
    channel = params.get("channel_id")
    if not isinstance(channel, str):
        raise RpcError(INVALID_PARAMS, "channel_id: expected PROVIDER:ID, e.g. telegram:456")
    return channel
