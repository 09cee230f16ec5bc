"""The local console (channel ``cli:local``): `agentcomms send` in, `agentcomms inbox` out.

It needs no connection: the gateway posts what is typed at the terminal and the projection is
the human's inbox, so there is nothing to receive from or send to.
"""

from __future__ import annotations

from agentcomms.config import Config
from agentcomms.transports import InboundSink, Receiver, Sender


def receiver(cfg: Config, sink: InboundSink) -> Receiver | None:
    return None


def sender(cfg: Config) -> Sender:
    raise NotImplementedError("the local channel is the projection itself: nothing is sent")
