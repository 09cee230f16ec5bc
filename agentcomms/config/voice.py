"""The ``voice`` section: the phone (call systems), speech accounts, text to speech, speech to text."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from agentcomms.config.home import agentcomms_home
from agentcomms.config.section import Section

# How the local phone (`agentcomms phone`, `phone --dial`) is named where a phone's number would
# be: the calls it places and answers, who answered a request; as an approver, phone:local.
LOCAL_PHONE = "the local phone"
_E164 = r"\+[1-9]\d{6,14}"


def phone_approver(phone: str) -> str:
    """The approver a phone is in ``agents.ID.approvers``: phone:NUMBER, or phone:local."""
    return "phone:local" if phone == LOCAL_PHONE else f"phone:{phone}"


def is_phone_approver(approver: str) -> bool:
    """Whether `approver` names a phone well: phone:local, or phone: and an E.164 number."""
    provider, _, phone = approver.partition(":")
    return provider == "phone" and (phone == "local" or re.fullmatch(_E164, phone) is not None)


class PhoneConfig(Section):
    """Where calls go: Twilio once its account is set, else the local phone (`agentcomms phone`)."""

    provider: Literal["twilio", "local"] = Field(
        default="twilio",
        description="twilio (used once account_sid, auth_token and numbers are set) or local",
    )
    account_sid: str | None = None
    auth_token: SecretStr | None = None
    from_number: str | None = None
    to_number: str | None = None
    base_url: str | None = None


class InboundConfig(Section):
    """Calls you place to the deployment's Twilio number (its "A call comes in" webhook:
    server.public_url + /webhooks/twilio/voice; its "Call status changes": the same + /status,
    which ends a call hung up mid-menu). A caller id can be spoofed, so a caller must be listed
    and key or say the PIN; wrong PINs are counted across calls, and a number that keys too
    many is locked out for a while."""

    allowed_callers: list[str] = Field(
        default_factory=list,
        description="numbers (E.164, +15551234567) that may call in; empty: nobody may",
    )
    pin: SecretStr | None = Field(
        default=None, description='4 to 12 digits, from the environment: "${AGENTCOMMS_PIN}"'
    )
    pin_tries: int = Field(
        default=3,
        ge=1,
        le=100,
        description="wrong PINs in a row from one number, across its calls, before the number "
        "is locked out (the right PIN starts the count again)",
    )
    pin_lockout_s: float = Field(
        default=1800,
        gt=0,
        description="how long a number is locked out after pin_tries wrong PINs: its calls are "
        "told so and asked for no PIN, and the human is told in their chats",
    )

    @field_validator("allowed_callers")
    @classmethod
    def _e164(cls, value: list[str]) -> list[str]:
        for number in value:
            if not re.fullmatch(_E164, number):
                raise ValueError(f"expected a number as +15551234567 (E.164), not {number!r}")
        return value

    @field_validator("pin")
    @classmethod
    def _digits(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not re.fullmatch(r"\d{4,12}", value.get_secret_value()):
            raise ValueError("expected 4 to 12 digits (value hidden), keyed or said on the phone")
        return value

    @model_validator(mode="after")
    def _pin_for_callers(self) -> InboundConfig:
        if self.allowed_callers and self.pin is None:
            raise ValueError(
                "allowed_callers needs a pin as well (a caller id can be spoofed): set "
                'voice.inbound.pin, e.g. "${AGENTCOMMS_PIN}"'
            )
        return self


SPEECH_PROVIDERS_HELP = "elevenlabs, deepgram, openai or local"


class SpeechAccount(Section):
    """One speech provider's account, shared by speaking and hearing (one key serves both)."""

    api_key: SecretStr | None = None
    base_url: str | None = Field(
        default=None, description="the provider's API elsewhere (a proxy, a test); null: its own"
    )


class TTSConfig(Section):
    provider: str = Field(default="elevenlabs", description=SPEECH_PROVIDERS_HELP)
    api_key: SecretStr | None = Field(
        default=None, description="the provider's key; null: voice.<provider>.api_key"
    )
    voice: str = Field(
        default="Rachel",
        description="the provider's voice: an ElevenLabs voice name or id, an OpenAI voice, "
        "an espeak-ng voice (Deepgram's voice is its model, e.g. aura-2-thalia-en)",
    )
    model: str = "eleven_turbo_v2_5"
    base_url: str | None = None
    fallback: list[str] = Field(
        default=[],
        description="providers tried, in order, when the provider fails; local ends the chain",
    )


class STTConfig(Section):
    provider: str = Field(default="deepgram", description=SPEECH_PROVIDERS_HELP)
    api_key: SecretStr | None = Field(
        default=None, description="the provider's key; null: voice.<provider>.api_key"
    )
    model: str = "nova-2"
    language: str = "en-US"
    silence_ms: int = Field(default=800, ge=0)
    base_url: str | None = None
    fallback: list[str] = Field(
        default=[],
        description="providers tried, in order, when the provider fails; local ends the chain",
    )
    grammar: Path | None = Field(
        default=None,
        description="local recognizer only: a JSGF grammar of the answers expected "
        "(recognition is exact within it); open vocabulary when unset",
    )


class VoiceConfig(Section):
    phone: PhoneConfig = PhoneConfig()
    inbound: InboundConfig = InboundConfig()
    tts: TTSConfig = TTSConfig()
    stt: STTConfig = STTConfig()
    elevenlabs: SpeechAccount = SpeechAccount()
    deepgram: SpeechAccount = SpeechAccount()
    openai: SpeechAccount = SpeechAccount()
    public_url: str | None = None
    audio_dir: Path | None = Field(
        default=None,
        description="where call audio is kept (shared by the worker and the gateway); "
        "<home>/audio when unset",
    )
    audio_keep_days: float = Field(
        default=30,
        gt=0,
        description="a call's sounds and transcript, and a voice note, are deleted this many "
        "days after they were last written (the gateway looks every few hours)",
    )
    transcript_timeout_s: float = Field(default=180, gt=0)
    ring_timeout_s: float = Field(default=30, gt=0)
    max_call_duration_s: float = Field(
        default=1800, gt=0, description="a call still up after this long is hung up"
    )
    sms_fallback: bool = Field(
        default=True,
        description="when nobody answers, send the message as an SMS (with Twilio SMS set "
        "up) or to the terminal inbox (`agentcomms inbox`)",
    )
    sms_fallback_message: str = (
        "I tried calling but couldn't reach you. Here's my message: {message}"
    )

    def audio_root(self) -> Path:
        return (self.audio_dir or agentcomms_home() / "audio").expanduser()
