"""The process agents of one host, as its worker keeps them: one :class:`ProcessAgent` each,
started again when the worker starts again (:meth:`ProcessAgents.resume`), stopped with it."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from pathlib import Path

from agentcomms.acp.runner import (
    SUBMIT_WAITS_S,
    Asker,
    ProcessAgent,
    Reporter,
    Spec,
    StartObserver,
    TurnObserver,
    Unavailable,
    UpdateObserver,
)

log = logging.getLogger(__name__)


class ProcessAgents:
    """The process agents of this host, by id; the worker's one instance."""

    def __init__(
        self,
        sessions: Path,
        *,
        report: Reporter,
        ask: Asker,
        turns: Sequence[TurnObserver] = (),
        updated: Sequence[UpdateObserver] = (),
        started: Sequence[StartObserver] = (),
        start_wait_s: float = SUBMIT_WAITS_S,
    ) -> None:
        self._sessions = sessions
        self._on_start = list(started)
        self._start_wait_s = start_wait_s  # how long a delivery waits for an agent to start
        self._report = report
        self._ask = ask
        self.turns = list(turns)
        self.updated = list(updated)
        self._agents: dict[str, ProcessAgent] = {}
        self._resuming: set[asyncio.Task[None]] = set()

    def get(self, agent_id: str) -> ProcessAgent | None:
        return self._agents.get(agent_id)

    async def agent(self, agent_id: str, spec: Spec) -> ProcessAgent:
        """The agent run as `spec` says; one run otherwise (a new registration) is stopped."""
        agent = self._agents.get(agent_id)
        if agent is not None and agent.spec != spec:
            await agent.close()
            agent = None
        if agent is None:
            agent = self._agents[agent_id] = ProcessAgent(
                agent_id,
                spec,
                self._sessions,
                report=self._report,
                ask=self._ask,
                turns=self.turns,
                updated=self.updated,
                started=self._on_start,
                start_wait_s=self._start_wait_s,
            )
        return agent

    async def stop(self, agent_id: str) -> bool:
        agent = self._agents.pop(agent_id, None)
        if agent is None:
            return False
        await agent.close()
        return True

    async def close(self) -> None:
        """Stop them all (the worker shuts down); their sessions stay kept, and the next worker
        on this host starts them again (:meth:`resume`)."""
        for task in self._resuming:
            task.cancel()
        agents = self._agents.values()
        await asyncio.gather(*(a.close(for_good=False) for a in agents), return_exceptions=True)
        self._agents.clear()

    def resume(self) -> None:
        """Start again, beside the worker's start, the agents the last worker on this host ran
        and nobody stopped: their state is known at once, not at their next message."""
        for kept_file in sorted(self._sessions.glob("*.json")):
            spec = _kept_spec(kept_file)
            if spec is not None:
                task = asyncio.create_task(self._resume(kept_file.stem, spec))
                self._resuming.add(task)
                task.add_done_callback(self._resuming.discard)

    async def _resume(self, agent_id: str, spec: Spec) -> None:
        try:
            await (await self.agent(agent_id, spec)).ensure_started()
        except Unavailable as exc:  # reported as offline, with the reason; a message retries
            log.warning("could not start process agent %s again: %s", agent_id, exc)


def _kept_spec(path: Path) -> Spec | None:
    """How to run the agent a host's file says was running when its worker ended; None if not."""
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("running") is not True:
        return None
    command, cwd = kept.get("command"), kept.get("cwd")
    if not isinstance(command, list) or not command or not isinstance(cwd, str):
        return None
    if not all(isinstance(part, str) for part in command):
        return None
    return Spec(
        command=tuple(command),
        cwd=Path(cwd),
        new_session_if_lost=kept.get("new_session_if_lost") is not False,
    )
