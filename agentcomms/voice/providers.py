"""Which speech providers a call tries, in order, and with which key: shared by speaking
(``voice.tts``) and hearing (``voice.stt``). The account itself is ``voice.accounts``; the SDK
clients that reach it are ``voice.clients``.

A chain is the section's ``provider`` then its ``fallback`` list, keeping only the providers
that have a key, and local last. A provider's key is the section's ``api_key`` when it is the
section's provider, else its account's (``voice.elevenlabs.api_key``…): one key serves both.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Self

from agentcomms.config import Config, SpeechAccount, STTConfig, TTSConfig
from agentcomms.errors import SpeechProviderUnavailable
from agentcomms.voice.accounts import Account

LOCAL = "local"
# Providers reached over the network with an account; each speaks and hears.
CLOUD: tuple[str, ...] = ("elevenlabs", "deepgram", "openai")
KNOWN: tuple[str, ...] = (*CLOUD, LOCAL)

Direction = Literal["tts", "stt"]


def _section(cfg: Config, direction: Direction) -> TTSConfig | STTConfig:
    return cfg.voice.tts if direction == "tts" else cfg.voice.stt


def account(cfg: Config, direction: Direction, name: str) -> Account | None:
    """How to reach provider `name` for this direction, or None when it has no key."""
    section = _section(cfg, direction)
    shared = getattr(cfg.voice, name, None) if name in CLOUD else None
    shared = shared if isinstance(shared, SpeechAccount) else SpeechAccount()
    if name == section.provider and section.api_key is not None:
        return Account(
            section.api_key.get_secret_value(),
            section.base_url or shared.base_url,
            f"voice.{direction}.api_key",
        )
    if shared.api_key is not None:
        base_url = shared.base_url or (section.base_url if name == section.provider else None)
        return Account(shared.api_key.get_secret_value(), base_url, f"voice.{name}.api_key")
    return None


def require_account(cfg: Config, direction: Direction, name: str) -> Account:
    found = account(cfg, direction, name)
    if found is None:
        raise SpeechProviderUnavailable(
            f"no key for {name}: set voice.{name}.api_key (or voice.{direction}.api_key)"
        )
    return found


def provider_chain(cfg: Config, direction: Direction) -> list[str]:
    """The providers a call tries, in order: those named that can be used, then local."""
    section = _section(cfg, direction)
    chain: list[str] = []
    for name in (section.provider, *section.fallback):
        if name == LOCAL:
            break  # local is the end of every chain; nothing after it would be reached
        if name in CLOUD and name not in chain and account(cfg, direction, name) is not None:
            chain.append(name)
    return [*chain, LOCAL]


def provider_class(table: Mapping[str, str], name: str, what: str) -> Any:
    """The class ``table`` names for provider ``name`` (``"module:Class"``), its module (and so its
    SDK) imported only now: a process that never speaks through a provider never loads it."""
    where = table.get(name)
    if where is None:
        raise SpeechProviderUnavailable(f"no {what} provider {name!r}; known: {', '.join(KNOWN)}")
    module, _, cls = where.partition(":")
    return getattr(importlib.import_module(module), cls)


def setting(section: TTSConfig | STTConfig, field: str, name: str, own: str) -> str:
    """A voice or model from the config, for provider `name`. The section's voice and model belong
    to its provider, and its defaults name ElevenLabs' voice and Deepgram's model: any other
    provider, or one in the fallback list, uses its own (`own`)."""
    value = str(getattr(section, field))
    if name == section.provider and value != type(section).model_fields[field].default:
        return value
    return own


class CloudProvider:
    """A provider reached with an account, in one direction: the account, and the model the config
    gives it. Each subclass names its provider, direction and default model."""

    name: ClassVar[str]  # as the config names it
    direction: ClassVar[Direction]
    default_model: ClassVar[str]
    # What a call reaches on the SDK's client ("speak.v1.audio"): the SDK builds these lazily,
    # importing their modules, so warming up touches them once.
    uses: ClassVar[tuple[str, ...]] = ()

    def __init__(self, account: Account, *, model: str) -> None:
        self.account = account
        self.model = model

    @classmethod
    def from_config(cls, cfg: Config) -> Self:
        return cls(require_account(cfg, cls.direction, cls.name), **cls.settings(cfg))

    async def warm(self) -> None:
        """Load the SDK and build its client as a call would, sending nothing."""
        from agentcomms.voice.clients import CLIENTS

        async with CLIENTS[self.name](self.account) as client:
            for path in self.uses:
                functools.reduce(getattr, path.split("."), client)

    @classmethod
    def settings(cls, cfg: Config) -> dict[str, str]:
        """The configured settings this provider is made with, beside its account."""
        section = _section(cfg, cls.direction)
        return {"model": setting(section, "model", cls.name, cls.default_model)}


def language_code(language: str) -> str:
    """The ISO-639-1 code the OpenAI and ElevenLabs APIs take: "en-US" -> "en"."""
    return language.split("-")[0].lower()
