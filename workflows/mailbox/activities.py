"""The activities a mailbox runs, declared by their signatures so the workflow calls them by
reference (a reader, mypy and the Temporal UI all follow one name) without importing the code
that types into panes or writes the database. Each runs as a local activity on the mailbox's
worker.

The worker registers the implementations under the same names (``workers/main.py``):
:class:`activities.delivery.PaneActivities`, :class:`activities.projection.ProjectionActivities`
and :class:`activities.receipts.ReceiptActivities`. ``tests/test_activity_declarations.py`` checks
that each declaration here has an implementation there with the same name, input and result.
``record_projection`` is the outbox's too: it is declared once, in :mod:`workflows.activities`.
"""

from __future__ import annotations

from temporalio import activity

from agentcomms.agents.state import HookReport
from agentcomms.models import (
    DeliverRequest,
    DeliveryOutcome,
    FollowUpLook,
    FollowUpRequest,
    InterruptRequest,
    LoadedEvents,
    LoadRequest,
    Recalled,
    RecallRequest,
    Registration,
    Unregister,
)
from agentcomms.outbox_models import QueueReceipt
from workflows.activities import declared

# Re-exported: the mailbox runs it as activities.record_projection like its own.
from workflows.activities import record_projection as record_projection


@activity.defn(name="deliver_to_pane")
async def deliver_to_pane(req: DeliverRequest) -> list[DeliveryOutcome]:
    """Type signed messages into the pane of a signed registration; the outcomes of the first."""
    raise declared()


@activity.defn(name="interrupt_pane")
async def interrupt_pane(req: InterruptRequest) -> bool:
    """Press the pane's interrupt key for a signed interrupt."""
    raise declared()


@activity.defn(name="check_registration")
async def check_registration(registration: Registration) -> bool:
    """Whether the deployment signed this registration of the mailbox's agent."""
    raise declared()


@activity.defn(name="follow_up_prompt")
async def follow_up_prompt(req: FollowUpRequest) -> FollowUpLook:
    """Look at the input box for a prompt not submitted; press Enter once more if it is there."""
    raise declared()


@activity.defn(name="check_unregister")
async def check_unregister(request: Unregister) -> bool:
    """Whether the deployment signed this unregister of the mailbox's agent."""
    raise declared()


@activity.defn(name="load_waiting_events")
async def load_waiting_events(request: LoadRequest) -> LoadedEvents:
    """Read waiting texts back from the projection, in order."""
    raise declared()


@activity.defn(name="queue_receipt")
async def queue_receipt(request: QueueReceipt) -> None:
    """Ask the chat's outbox to show the human their message was typed."""
    raise declared()


@activity.defn(name="recall_mailbox")
async def recall_mailbox(request: RecallRequest) -> Recalled:
    """What the agent's earlier runs obeyed and typed, from the projection (a run started
    afresh)."""
    raise declared()


@activity.defn(name="check_report")
async def check_report(report: HookReport) -> bool:
    """Whether the deployment (the gateway, for the agent's hooks) signed this hook report."""
    raise declared()
