"""The gateway's errors: its socket's error replies, as the gateway raises them and as a client
receives them, and the refusals a sender hears."""

from __future__ import annotations

from agentcomms.errors.base import AgentcommsError


class GatewayUnavailable(AgentcommsError):
    """The gateway socket does not answer."""


class GatewayAlreadyRunning(AgentcommsError):
    """Another gateway answers on the socket."""


class ListenerUnavailable(AgentcommsError):
    """An HTTP listener (webhooks, the console, metrics, the codec server) cannot bind its
    address: another program holds the port, or the address is not this machine's."""


class GatewayError(AgentcommsError):
    """The gateway answered with an error reply."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class AnswerRefused(AgentcommsError):
    """The approval's worker refused an answer the gateway signed: their deployment keys differ."""


class MailboxFull(AgentcommsError):
    """An agent's mailbox holds as much as its limits allow; the message was not accepted."""


class PanesUnknown(AgentcommsError):
    """Whether a process runs in an agent's pane cannot be told now (the projection or a tmux
    server did not answer): what decides for the human is refused, not guessed."""


class RpcError(Exception):
    """An error reply: its code is one of ``gateway.socket.protocol``'s, its message says what to do."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class TraceNotFound(LookupError):
    """No event has that id."""
