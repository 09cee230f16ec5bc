"""A new tmux window for an agent a human can attach to: the kind's own CLI (Claude Code, Codex,
Gemini CLI) started in a folder, in the session ``acp.tmux_session`` of the server
``acp.tmux_socket``, with ``AGENTCOMMS_AGENT_ID`` set so its hooks (``agentcomms install KIND``)
report as that agent. The caller registers the pane it returns."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from agentcomms.acp.kinds import AGENTS_PREFIX
from agentcomms.bridge import BridgeError, TmuxAdapter
from agentcomms.config import Config

# The program each kind's CLI installs; all three take Escape as the interrupt of a turn.
PROGRAMS = {"claude-code": "claude", "codex": "codex", "gemini": "gemini"}
INTERRUPT_KEY = "Escape"


@dataclass(frozen=True)
class Window:
    target: str  # session:window.pane
    socket: str | None


def program(kind: str) -> str:
    """The kind's CLI on this host; ValueError saying what to install otherwise."""
    name = PROGRAMS.get(kind)
    if name is None:
        raise ValueError(f"--tmux opens {', '.join(PROGRAMS)} in a pane, not {kind!r}")
    installed = AGENTS_PREFIX / "node_modules" / ".bin" / name
    found = str(installed) if installed.exists() else shutil.which(name)
    if found is None:
        raise ValueError(f"{name} ({kind}'s CLI) is not installed on this host: install it first")
    return found


async def open_window(cfg: Config, agent_id: str, folder: Path, kind: str) -> Window:
    """Start `kind`'s CLI in `folder` in a new window (the session made when missing)."""
    argv = program(kind)
    adapter = TmuxAdapter()
    socket = cfg.acp.tmux_socket
    session = cfg.acp.tmux_session
    where = ["-c", str(folder), "-e", f"AGENTCOMMS_AGENT_ID={agent_id}"]
    shown = ["-P", "-F", "#{session_name}:#{window_index}.#{pane_index}"]
    try:
        await adapter.run_commands(socket, [["has-session", "-t", f"={session}"]])
        opened = [["new-window", "-d", "-t", f"={session}:", "-n", agent_id, *where, *shown, argv]]
    except BridgeError:  # no such session, or no server yet: tmux starts both
        opened = [["new-session", "-d", "-s", session, "-n", agent_id, *where, *shown, argv]]
    try:
        target = (await adapter.run_commands(socket, opened)).strip()
    except BridgeError as exc:
        raise ValueError(f"no window opened for {agent_id}: {exc}") from exc
    return Window(target=target, socket=socket)
