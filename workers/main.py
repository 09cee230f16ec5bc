"""Build the Temporal workers of one host.

Every host's worker polls two queues: the shared one (``temporal.task_queue``) and its own host
queue (``agentcomms-host-<host>``), where the agent workflows whose panes live here run and type
through local activities.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from temporalio.client import Client
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker

from activities.approvals import ApprovalActivities
from activities.chat import ChatActivities
from activities.delivery import PaneActivities
from activities.escalation import EscalationActivities
from activities.process import ProcessDoor
from activities.projection import ProjectionActivities
from activities.receipts import ReceiptActivities
from activities.voice import TwilioCallActivities, VoiceActivities
from agentcomms.acp.asking import Approvals, StartsToGateway, TurnsToGateway
from agentcomms.acp.host import ProcessAgents
from agentcomms.acp.runner import Wiring
from agentcomms.agents.state import HookReport
from agentcomms.config import Config, host_name
from agentcomms.config.home import agentcomms_home
from agentcomms.store import Store
from agentcomms.trust import DeploymentKey
from agentcomms.voice.warm import speech_warmed
from agentcomms.workflow_ids import host_task_queue
from workflows.approval.workflow import ApprovalWorkflow
from workflows.call import CallWorkflow
from workflows.escalation.workflow import EscalationWorkflow
from workflows.mailbox.client import Mailbox
from workflows.mailbox.workflow import AgentWorkflow
from workflows.outbox.client import Outbox
from workflows.outbox.workflow import OutboxWorkflow

log = logging.getLogger(__name__)

# Mailboxes kept in memory per worker; others are replayed from their history when a message
# comes. This, not the number of agents, bounds a worker's memory: about 0.3 MB per cached
# mailbox measured (1,000 idle agents: 424 MB against 113 MB with none).
WORKFLOW_CACHE = 1000


def build_workers(
    client: Client, cfg: Config, store: Store, *, host: str | None = None, shared: bool = True
) -> list[Worker]:
    """This host's workers; `shared=False` leaves the shared queue to another process."""
    key = DeploymentKey.load(cfg.security)
    projection = ProjectionActivities(store, key)
    this_host = host or host_name()
    processes = process_agents(client, cfg, store, key)
    # Types (or prompts) only what the deployment signed.
    panes = PaneActivities(key, store, process=ProcessDoor(processes, this_host))
    # A mailbox that typed a chat message queues its receipt in the outbox, on the shared queue.
    receipts = ReceiptActivities(Outbox(client, cfg.temporal.task_queue, key=key).post)
    activities: list[Any] = [
        panes.deliver_to_pane,
        panes.interrupt_pane,
        panes.check_registration,
        panes.check_unregister,
        panes.follow_up_prompt,
        panes.check_report,
        projection.record_projection,
        projection.load_waiting_events,
        projection.recall_mailbox,
        receipts.queue_receipt,
    ]
    workers = [
        Worker(
            client,
            task_queue=host_task_queue(host or host_name()),
            workflows=[AgentWorkflow],
            activities=activities,
            max_cached_workflows=WORKFLOW_CACHE,
            plugins=[_stopped_at_shutdown(processes)],
        )
    ]
    if shared:
        # Chat sends need no pane: any host's worker may send, with its own config's credentials.
        chat = ChatActivities(cfg, key, store)
        # Calls run on the shared queue: nothing of a call is tied to one host's panes. A call
        # that is not answered blocking hands its answer to the agent's mailbox.
        mailbox = Mailbox(
            client,
            store,
            task_queue=cfg.temporal.task_queue,
            key=key,
            limits=cfg.mailbox_limits,
            accepted_by=f"the worker on {this_host} (pid {os.getpid()})",
        )
        voice = VoiceActivities(cfg, store, key, post=mailbox.post)
        twilio_calls = TwilioCallActivities(cfg, key)
        rungs = EscalationActivities(cfg, key, store)
        approvals = ApprovalActivities(key)
        workers.append(
            Worker(
                client,
                task_queue=cfg.temporal.task_queue,
                workflows=[
                    AgentWorkflow,
                    OutboxWorkflow,
                    CallWorkflow,
                    ApprovalWorkflow,
                    EscalationWorkflow,
                ],
                activities=[
                    *activities,
                    chat.send_chat,
                    voice.check_call,
                    voice.check_line_event,
                    voice.check_turn,
                    voice.synthesize_speech,
                    voice.transcribe_speech,
                    voice.record_call,
                    voice.send_call_fallback,
                    voice.post_call_answer,
                    twilio_calls.place_twilio_call,
                    twilio_calls.update_twilio_call,
                    twilio_calls.end_twilio_call,
                    rungs.fire_rung,
                    rungs.check_escalation_answered,
                    approvals.check_decision,
                ],
                max_cached_workflows=WORKFLOW_CACHE,
                plugins=[
                    _closed_at_shutdown(chat),
                    # The first call would wait for its speech SDKs to load: load them now.
                    SimplePlugin(
                        "agentcomms-speech-warm-up", run_context=lambda: speech_warmed(cfg)
                    ),
                ],
            )
        )
    return workers


def process_agents(client: Client, cfg: Config, store: Store, key: DeploymentKey) -> ProcessAgents:
    """This host's process agents, reporting their state to their mailboxes (signed, as the
    gateway signs what a pane agent's hooks say)."""
    mailbox = Mailbox(client, store, task_queue=cfg.temporal.task_queue, key=key)

    async def report(agent_id: str, report: HookReport) -> None:
        await mailbox.report(agent_id, report)

    # The gateway's approvals, asked on its socket as an agent's hook asks them.
    approvals = Approvals(cfg.server.socket(), cfg.never_rules, agentcomms_home())
    turns = TurnsToGateway(cfg.server.socket())
    return ProcessAgents(
        Wiring(
            cfg.acp.state_root(),
            report=report,
            ask=approvals.ask,
            turns=[turns],
            updated=[turns.updated],
            started=[StartsToGateway(cfg.server.socket())],
        )
    )


def _stopped_at_shutdown(processes: ProcessAgents) -> SimplePlugin:
    """A host's process agents end with its worker; their sessions are kept for the next."""

    @asynccontextmanager
    async def agents_running() -> AsyncIterator[None]:
        processes.resume()  # those the last worker here ran, started again with their sessions
        try:
            yield
        finally:
            await processes.close()

    return SimplePlugin("agentcomms-process-agents", run_context=agents_running)


def _closed_at_shutdown(chat: ChatActivities) -> SimplePlugin:
    """The chat senders' connections (a logged-in Discord client) last as long as the worker
    that sends with them, and are closed once it has shut down, however it is run."""

    @asynccontextmanager
    async def senders_open() -> AsyncIterator[None]:
        try:
            yield
        finally:
            await chat.close()

    return SimplePlugin("agentcomms-chat-senders", run_context=senders_open)


async def run_workers(workers: list[Worker]) -> None:
    """Run until cancelled, then shut the workers down cleanly."""
    async with AsyncExitStack() as stack:
        for worker in workers:
            await stack.enter_async_context(worker)
        log.info("worker polling %s", ", ".join(w.task_queue for w in workers))
        await asyncio.Event().wait()
