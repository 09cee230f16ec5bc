"""A new agent from a human away from the terminal: an id, a folder and a kind, as a chat's
``/new`` and the console's New agent form give them, and never a command.

The folder must lie under one of ``acp.roots`` (``agents.start.roots``) once symlinks and
``..`` are resolved; the kind is a known one (already installed: installing runs npm, the
operator's to do) or one the operator wrote into ``acp.kinds``. Only a new id is taken: a
pane, a running agent or one of the config's is never turned into another process in another
folder.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentcomms.acp.kinds import AGENTS_PREFIX, KINDS, find
from agentcomms.config import Config
from agentcomms.ids import check_agent_id
from agentcomms.store import Store
from gateway.agents.processes import ProcessAgentMethods, StartAgentParams

DEFAULT_KIND = "claude-code"
# A new agent's row is written by its mailbox a moment after its start: looked for this many
# times, a tenth of a second apart, before the start is answered anyway.
ROW_WAITS = 50


def under_roots(folder: str, roots: list[Path]) -> Path:
    """`folder` as the file system has it, when that is under one of `roots` (resolved);
    ValueError saying where agents may be started otherwise."""
    listed = ", ".join(str(r) for r in roots)
    if not roots:
        raise ValueError(
            "no folder is open to agents started from a chat or the console: the operator "
            'lists them in acp.roots (or agents.start.roots), e.g. "roots": ["~/src"]'
        )
    path = Path(folder).expanduser()
    if not path.is_absolute():
        raise ValueError(f"{folder}: give the folder's whole path, under one of: {listed}")
    resolved = path.resolve()  # symlinks and ".." as the agent would meet them
    if not any(resolved.is_relative_to(root) for root in roots):
        raise ValueError(f"{folder} is not under a folder open to agents; those are: {listed}")
    return resolved


class NewAgents:
    """Checks a new agent's id, folder and kind, and starts it headless."""

    def __init__(self, cfg: Config, store: Store, processes: ProcessAgentMethods) -> None:
        self._cfg = cfg
        self._store = store
        self._processes = processes

    def kinds(self) -> list[str]:
        """The kinds one may name: the known ones, then the operator's own."""
        return list(dict.fromkeys([*KINDS, *self._cfg.acp.kinds]))

    async def roots(self) -> list[Path]:
        # Resolving reads the file system (symlinks): off the event loop.
        return await asyncio.to_thread(self._cfg.acp.resolved_roots)

    async def checked(self, agent_id: str, folder: str) -> Path:
        """The resolved folder for a new agent `agent_id`; ValueError saying what is wrong."""
        check_agent_id(agent_id)
        existing = await self._store.get_agent(agent_id)
        if agent_id in self._cfg.agents or (
            existing is not None and (existing.type != "process" or existing.status != "offline")
        ):
            raise ValueError(
                f"{agent_id} is already an agent: choose another id (/agents lists them)"
            )
        return await asyncio.to_thread(under_roots, folder, await self.roots())

    async def kind_command(self, kind: str) -> list[str]:
        """The command of a kind: the operator's own, else a known one installed here."""
        own = self._cfg.acp.kinds.get(kind)
        if own is not None:
            return list(own)
        if kind not in KINDS:
            raise ValueError(f"no kind {kind!r}; a chat may start: {', '.join(self.kinds())}")
        command = find(kind)
        if command is None:
            raise ValueError(
                f"{kind} is not installed on this host: the operator installs it once with "
                f"`agentcomms agents start ID --dir DIR --kind {kind}` (or npm install "
                f"--prefix {AGENTS_PREFIX} {KINDS[kind].package})"
            )
        return command

    async def start(self, agent_id: str, folder: str, kind: str) -> tuple[dict[str, Any], Path]:
        """Start a new process agent headless (`start_agent`): its answer, and its folder; once
        its mailbox wrote its row, so it is listed (and has a console page) at once."""
        resolved = await self.checked(agent_id, folder)
        command = await self.kind_command(kind)
        try:
            params = StartAgentParams(agent_id=agent_id, dir=str(resolved), command=command)
        except ValidationError as exc:
            raise ValueError(exc.errors()[0]["msg"]) from None
        started = await self._processes.start_agent(params)
        for _ in range(ROW_WAITS):
            if await self._store.get_agent(agent_id) is not None:
                break
            await asyncio.sleep(0.1)
        return started, resolved
