"""What every delivery endpoint offers.

An endpoint kind (a tmux pane today; a process's stdin, say, tomorrow) is one module with one class
that satisfies :class:`Adapter`, registered by name in :mod:`agentcomms.bridge`. Activities talk to
the protocol only, so a new kind needs no change to them.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from agentcomms.models import DeliveryOutcome, Keypress, PaneTarget, Typing


@runtime_checkable
class Adapter(Protocol):
    """One kind of endpoint that can be typed into and interrupted."""

    async def deliver(self, req: Typing) -> DeliveryOutcome:
        """Type `req.text` and submit it, at most once per `req.event_id`."""
        ...

    async def deliver_batch(self, reqs: list[Typing]) -> list[DeliveryOutcome]:
        """Deliver several requests to one endpoint, in order; the outcomes of the first of
        them, as many as were typed or found typed (raises only when the first fails)."""
        ...

    async def interrupt(self, req: Keypress) -> bool:
        """Press the interrupt key; False when this event's key was already pressed."""
        ...

    async def exists(self, pane: PaneTarget) -> bool:
        """True when the endpoint is there and able to receive text."""
        ...
