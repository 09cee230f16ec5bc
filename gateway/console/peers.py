"""The console is the human's: a connection from a process in a registered agent's pane, or
from another Unix user, is refused before any route runs, whatever cookie or token it carries.

The console listens on loopback only, so the kernel's tables name the process at the other end
(:mod:`gateway.socket.loopback`), and :mod:`gateway.socket.panes` says whose pane it runs in,
as the socket's peer credentials do for the socket. An agent runs as its human's user and can
read what the human's browser sends or keeps; it cannot connect from outside its pane.
"""

from __future__ import annotations

import asyncio
import os
import pwd

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from agentcomms.errors import PanesUnknown
from gateway.socket.loopback import holders, loopback_socket
from gateway.socket.panes import AgentPanes, holding

# The console's script and styles hold nothing of the human's.
_OPEN = "/static/"
_TO_DO = "Open the console from a browser outside the agents' panes."


async def refusal(
    panes: AgentPanes, client: tuple[str, int], server: tuple[str, int]
) -> str | None:
    """Why the connection from ``client`` to the console at ``server`` is not the human's;
    None when it is."""
    peer = await asyncio.to_thread(loopback_socket, client, server)
    if peer is None:
        return (
            "The console is the human's, and this connection is in none of the kernel's tables "
            f"of this machine's connections, so whose it is cannot be told. {_TO_DO}"
        )
    if peer.uid != os.getuid():
        return (
            f"The console is {_user(os.getuid())}'s, and this connection comes from Unix user "
            f"{_user(peer.uid)}: an agent that runs as its own user reaches nothing of the "
            f"human's. {_TO_DO}"
        )
    try:
        agents = await panes.panes()
    except PanesUnknown as exc:
        return f"The console cannot tell now whether this connection comes from an agent's pane: {exc}. Try again in a moment."
    if not agents:
        return None
    pids, hidden = await asyncio.to_thread(holders, peer.inode)
    for pid in pids:
        found = await asyncio.to_thread(holding, pid, agents)
        if found is not None:
            return (
                f"The console is the human's, and the process that connected (pid {pid}) runs "
                f"in {found}: an agent may not act for its human. {_TO_DO}"
            )
    if not pids:
        # Its holder hides its open files (it made itself undumpable): refused if any process
        # in an agent's pane hides them too, for it could be that one.
        for pid in hidden:
            found = await asyncio.to_thread(holding, pid, agents)
            if found is not None:
                return (
                    f"The console is the human's, and the process that connected hides its "
                    f"open files, as process {pid} in {found} does. {_TO_DO}"
                )
    return None


class OnlyTheHuman:
    """ASGI middleware: every request but the static files passes :func:`refusal` first."""

    def __init__(self, app: ASGIApp, *, panes: AgentPanes) -> None:
        self._app = app
        self._panes = panes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith(_OPEN):
            client, server = scope.get("client"), scope.get("server")
            refused = (
                "The console cannot tell who connected: no address."
                if client is None or server is None
                else await refusal(self._panes, tuple(client), tuple(server))
            )
            if refused is not None:
                response = PlainTextResponse(refused, 403, headers={"Cache-Control": "no-store"})
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"
