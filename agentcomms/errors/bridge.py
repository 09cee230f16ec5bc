"""What a delivery endpoint (a tmux pane) raises when it cannot be reached or driven."""

from __future__ import annotations

from agentcomms.errors.base import AgentcommsError


class BridgeError(AgentcommsError):
    """An endpoint could not be reached or driven."""


class PaneNotFound(BridgeError):
    """The pane, its window or session, or the whole tmux server is not there (it may come back)."""


class PaneNotReady(BridgeError):
    """The pane does not show the agent at its prompt (a dialog, copy mode, a turn running, a
    shell): nothing was typed, and the message waits for the agent to be ready."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason  # "dialog", "copy-mode", "busy", "exited" or "draft"


class TmuxError(BridgeError):
    """tmux failed for another reason; the message carries tmux's own stderr."""

    def __init__(self, message: str, *, stderr: str = "", returncode: int | None = None) -> None:
        super().__init__(message)
        self.stderr = stderr
        self.returncode = returncode


class InvalidTarget(BridgeError, ValueError):
    """A target, key, event id or option that no retry can make work."""
