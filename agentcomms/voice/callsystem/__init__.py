"""Call systems: how a call reaches the human's phone.

- ``local``: the terminal phone, `agentcomms phone`, talking to the gateway's socket. What to
  play it reads from the call workflow's line; what happened it reports as line events.
- ``twilio``: a real phone number, once `voice.phone` holds an account and both numbers.
"""

from __future__ import annotations

from agentcomms.config import Config
from agentcomms.errors import ConfigError
from agentcomms.voice.models import CallSystem

LOCAL_NUMBER = "local"


def twilio_configured(cfg: Config) -> bool:
    phone = cfg.voice.phone
    return bool(
        phone.provider == "twilio"
        and phone.account_sid
        and phone.auth_token
        and phone.from_number
        and phone.to_number
    )


def call_system(cfg: Config) -> tuple[CallSystem, str | None]:
    """The system a new call goes through, and the number it rings (None: the local phone)."""
    if not twilio_configured(cfg):
        # No account: the call rings the local phone (`agentcomms phone`).
        return "local", None
    if not cfg.server.public_url:
        raise ConfigError(
            "server.public_url is not set: Twilio must reach the gateway's webhooks to place "
            'a call (or set voice.phone.provider to "local" to ring `agentcomms phone`)'
        )
    return "twilio", cfg.voice.phone.to_number
