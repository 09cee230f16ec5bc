"""An agent's urgent message (`send_message(…, urgent=true)`) finds its human: it climbs the
agent's escalation ladder in its own workflow (``escalation-<agent>``) until the human writes to
the agent from any surface (an `answered` signed like every input of a workflow: one anyone
else signals stops nothing). Quiet hours do not hold it: the agent said it is urgent.

One ladder per agent at a time: a second urgent message while one climbs rides along (the human
is being looked for already). The human's message stops it: this gateway hears every message
the mailbox takes (an observer of :class:`Mailbox`) and tells the agents' open ladders.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError

from agentcomms.config import Config
from agentcomms.escalation_models import Escalation, RungRecord
from agentcomms.models import Event, utcnow
from agentcomms.store import Store
from agentcomms.trust import DeploymentKey
from agentcomms.workflow_ids import escalation_workflow_id
from gateway.agents.budget import Budgets
from gateway.socket.results import Escalating
from workflows.escalation.models import Answered, EscalationInput
from workflows.escalation.workflow import EscalationWorkflow

log = logging.getLogger(__name__)
# How long a ladder's run may outlive its last rung (for the call it places to start).
RUN_MARGIN = timedelta(minutes=10)


class UrgentMessages:
    def __init__(
        self,
        cfg: Config,
        client: Client,
        key: DeploymentKey,
        store: Store,
        *,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        # The clock the ladder's opening is stamped with: Temporal's, as it starts the workflow,
        # is checked against it (a test server's runs ahead of ours).
        self._clock = clock
        self._cfg = cfg
        self._client = client
        self._key = key
        self._budgets = Budgets(cfg, store, clock=clock)
        self._climbing: set[str] = set()  # agents whose ladder this gateway started
        self._tasks: set[asyncio.Task[Any]] = set()

    async def sent(self, agent_id: str, event_id: str, text: str) -> Escalating:
        """The agent sent `text` marked urgent: start its ladder (or join the one climbing)."""
        rungs, quiet, _ = self._cfg.escalation_for(agent_id)
        if not rungs:
            return {"escalation": None, "note": "no escalation ladder is configured"}
        if not await self._climbing_now(agent_id):  # else it rides along, at no cost
            refusal = await self._budgets.ladder_refusal(agent_id)
            if refusal is not None:  # the message itself is sent: only its ladder is refused
                return {"escalation": None, "note": f"no escalation ladder: {refusal}"}
        escalation = self._key.sign_escalation(
            Escalation(
                kind="message",
                subject_id=event_id,
                agent_id=agent_id,
                text=f"{agent_id} says: {text}",
                rungs=rungs,
                quiet_hours=quiet,
                overrides_quiet=True,
                opened_at=self._clock(),
            )
        )
        handle = await self._client.start_workflow(
            EscalationWorkflow.run,
            EscalationInput(escalation=escalation),
            id=escalation_workflow_id(agent_id),
            task_queue=self._cfg.temporal.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            # Its last rung's call may ring, then talk, before the ladder ends.
            execution_timeout=timedelta(
                seconds=rungs[-1].after_s
                + self._cfg.voice.ring_timeout_s
                + self._cfg.voice.max_call_duration_s
            )
            + RUN_MARGIN,
            static_summary=f"urgent message {event_id} of {agent_id} finding its human",
        )
        self._climbing.add(agent_id)
        return {"escalation": handle.id}

    async def _climbing_now(self, agent_id: str) -> bool:
        """Whether the agent's ladder climbs already (a new urgent message rides along)."""
        handle = self._client.get_workflow_handle(escalation_workflow_id(agent_id))
        try:
            described = await handle.describe()
        except RPCError:
            return False
        return described.status == WorkflowExecutionStatus.RUNNING

    async def rungs(self, agent_id: str) -> list[RungRecord]:
        """What the agent's latest ladder did (empty when it has none)."""
        handle = self._client.get_workflow_handle_for(
            EscalationWorkflow.run, escalation_workflow_id(agent_id)
        )
        try:
            return await handle.query(EscalationWorkflow.rungs)
        except RPCError:
            return []

    async def heard(self, event: Event) -> None:
        """A message the mailbox took: the human's to an agent with a ladder climbing stops it."""
        if event.role != "human" or event.agent_id not in self._climbing:
            return
        self._climbing.discard(event.agent_id)
        via = str(event.payload.get("provider") or event.channel_id.partition(":")[0])
        handle = self._client.get_workflow_handle_for(
            EscalationWorkflow.run, escalation_workflow_id(event.agent_id)
        )
        try:
            answered = self._key.sign_escalation_answered(
                event.agent_id, Answered(via=via, at=self._clock())
            )
            await handle.signal(EscalationWorkflow.answered, answered)
        except RPCError as exc:  # it ended already: nothing left to stop
            log.debug("escalation of %s: %s", event.agent_id, exc)
