"""WhatsApp: channels ``whatsapp:+15551234567`` (the human's number) and an allowlist of numbers,
reached through one of two APIs, chosen by ``chat.whatsapp.api``:

- ``twilio`` (the default): Twilio's Messaging API, webhook ``/webhooks/twilio/whatsapp``
  (:mod:`agentcomms.transports._twilio`);
- ``cloud``: Meta's WhatsApp Business Cloud API, webhook ``/webhooks/whatsapp``
  (:mod:`agentcomms.transports._whatsapp_cloud`).

Either way the human and the agents see the same provider, so switching keeps every channel
mapping and every admitted sender. Each API's SDK is imported only when it is the one chosen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentcomms.config import Config
from agentcomms.transports import InboundSink, Receiver, Sender

if TYPE_CHECKING:
    from agentcomms.transports._twilio import Flavour


def receiver(cfg: Config, sink: InboundSink) -> Receiver:
    if cfg.chat.whatsapp.api == "cloud":
        from agentcomms.transports._whatsapp_cloud import CloudReceiver

        return CloudReceiver(cfg, sink)
    from agentcomms.transports._twilio import TwilioReceiver

    return TwilioReceiver(_twilio_flavour(), cfg, sink)


def sender(cfg: Config) -> Sender:
    if cfg.chat.whatsapp.api == "cloud":
        from agentcomms.transports._whatsapp_cloud import CloudSender

        return CloudSender(cfg)
    from agentcomms.transports._twilio import TwilioSender

    return TwilioSender(_twilio_flavour(), cfg)


def _twilio_flavour() -> Flavour:
    from agentcomms.transports._twilio import Flavour

    # Twilio spells WhatsApp numbers "whatsapp:+1555…"; our chat id is the number alone.
    return Flavour(name="whatsapp", path="/webhooks/twilio/whatsapp", address_prefix="whatsapp:")
