"""What every delivery endpoint offers, and the errors it raises.

An endpoint kind (a tmux pane today; a process's stdin, say, tomorrow) is one module with one class
that satisfies :class:`Adapter`, registered by name in :mod:`agentcomms.bridge`. Activities talk to
the protocol only, so a new kind needs no change to them.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from agentcomms.errors import AgentcommsError
from agentcomms.models import DeliveryOutcome, Keypress, PaneTarget, Typing


class BridgeError(AgentcommsError):
    """An endpoint could not be reached or driven."""


class PaneNotFound(BridgeError):
    """The pane, its window or session, or the whole tmux server is not there (it may come back)."""


class TmuxError(BridgeError):
    """tmux failed for another reason; the message carries tmux's own stderr."""

    def __init__(self, message: str, *, stderr: str = "", returncode: int | None = None) -> None:
        super().__init__(message)
        self.stderr = stderr
        self.returncode = returncode


class InvalidTarget(BridgeError, ValueError):
    """A target, key, event id or option that no retry can make work."""


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
