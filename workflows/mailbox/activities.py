"""The activities a mailbox runs, declared by their signatures so the workflow calls them by
reference (a reader, mypy and the Temporal UI all follow one name) without importing the code
that types into panes or writes the database. Each runs as a local activity on the mailbox's
worker.

The worker registers the implementations under the same names (``workers/main.py``):
:class:`activities.delivery.PaneActivities`, :class:`activities.projection.ProjectionActivities`
and :class:`activities.receipts.ReceiptActivities`. ``tests/test_house.py`` checks that each
declaration here has an implementation there with the same name, input and result.
"""

from __future__ import annotations

from temporalio import activity

from agentcomms.models import (
    DeliverRequest,
    DeliveryOutcome,
    InterruptRequest,
    LoadedEvents,
    LoadRequest,
    ProjectionUpdate,
    Unregister,
)
from agentcomms.outbox_models import QueueReceipt


def _declared() -> NotImplementedError:
    return NotImplementedError("a declaration: the worker registers its implementation")


@activity.defn(name="deliver_to_pane")
async def deliver_to_pane(req: DeliverRequest) -> list[DeliveryOutcome]:
    """Type signed messages into the pane of a signed registration; the outcomes of the first."""
    raise _declared()


@activity.defn(name="interrupt_pane")
async def interrupt_pane(req: InterruptRequest) -> bool:
    """Press the pane's interrupt key for a signed interrupt."""
    raise _declared()


@activity.defn(name="check_unregister")
async def check_unregister(request: Unregister) -> bool:
    """Whether the deployment signed this unregister of the mailbox's agent."""
    raise _declared()


@activity.defn(name="record_projection")
async def record_projection(update: ProjectionUpdate) -> None:
    """Write settled events, the agent row, or waiting texts to the projection."""
    raise _declared()


@activity.defn(name="load_waiting_events")
async def load_waiting_events(request: LoadRequest) -> LoadedEvents:
    """Read waiting texts back from the projection, in order."""
    raise _declared()


@activity.defn(name="queue_receipt")
async def queue_receipt(request: QueueReceipt) -> None:
    """Ask the chat's outbox to show the human their message was typed."""
    raise _declared()
