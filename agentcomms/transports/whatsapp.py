"""WhatsApp through Twilio: webhook at ``/webhooks/twilio/whatsapp``, channels
``whatsapp:+15551234567`` (the sender's number, without Twilio's ``whatsapp:`` prefix)."""

from __future__ import annotations

from agentcomms.config import Config
from agentcomms.transports import InboundSink
from agentcomms.transports._twilio import Flavour, TwilioReceiver, TwilioSender

FLAVOUR = Flavour(name="whatsapp", path="/webhooks/twilio/whatsapp", address_prefix="whatsapp:")


def receiver(cfg: Config, sink: InboundSink) -> TwilioReceiver:
    return TwilioReceiver(FLAVOUR, cfg, sink)


def sender(cfg: Config) -> TwilioSender:
    return TwilioSender(FLAVOUR, cfg)
