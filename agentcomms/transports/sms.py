"""SMS through Twilio: webhook at ``/webhooks/twilio/sms``, channels ``sms:+15551234567``."""

from __future__ import annotations

from agentcomms.config import Config
from agentcomms.transports import InboundSink
from agentcomms.transports._twilio import Flavour, TwilioReceiver, TwilioSender

FLAVOUR = Flavour(name="sms", path="/webhooks/twilio/sms", address_prefix="")


def receiver(cfg: Config, sink: InboundSink) -> TwilioReceiver:
    return TwilioReceiver(FLAVOUR, cfg, sink)


def sender(cfg: Config) -> TwilioSender:
    return TwilioSender(FLAVOUR, cfg)
