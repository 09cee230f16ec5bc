"""The one configuration file: ``~/.agentcomms/config.json``.

Every process (up, worker, gateway, mcp, the CLI) reads the same file through :func:`load_config`.
``AGENTCOMMS_HOME`` moves the whole directory, which is how tests get a private one.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

HOME_ENV = "AGENTCOMMS_HOME"
DEFAULT_HOME = Path("~/.agentcomms")
CONFIG_FILENAME = "config.json"


def agentcomms_home() -> Path:
    """The agentcomms directory: ``$AGENTCOMMS_HOME`` or ``~/.agentcomms``."""
    return Path(os.environ.get(HOME_ENV) or DEFAULT_HOME).expanduser()


def default_config_path() -> Path:
    return agentcomms_home() / CONFIG_FILENAME


class Section(BaseModel):
    # A misspelt key is a mistake the user wants to hear about, not a silently ignored one.
    model_config = ConfigDict(extra="forbid")


class ServerConfig(Section):
    """The gateway: its Unix socket and (later) its HTTP listener for provider webhooks."""

    socket_path: Path | None = Field(
        default=None, description="Unix socket of the gateway; <home>/daemon.sock when unset"
    )
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=8765, ge=0, le=65535)

    def socket(self) -> Path:
        return (self.socket_path or agentcomms_home() / "daemon.sock").expanduser()


class TemporalConfig(Section):
    address: str = "127.0.0.1:7233"
    namespace: str = "default"
    task_queue: str = "agentcomms"
    embedded: bool = Field(
        default=True,
        description="Start `temporal server start-dev` when nothing answers at a local address",
    )
    ui_port: int = Field(default=8233, ge=1, le=65535)
    db_filename: Path | None = Field(
        default=None, description="Dev server database file; <home>/temporal.db when unset"
    )
    api_key: SecretStr | None = None
    tls: bool = False

    def dev_db_path(self) -> Path:
        return (self.db_filename or agentcomms_home() / "temporal.db").expanduser()


class DatabaseConfig(Section):
    url: str | None = Field(
        default=None, description="SQLAlchemy async URL; a SQLite file in the home when unset"
    )

    def resolved_url(self) -> str:
        return self.url or f"sqlite+aiosqlite:///{agentcomms_home() / 'agentcomms.db'}"


class AgentConfig(Section):
    """An agent registered when agentcomms starts."""

    type: Literal["tmux"] = "tmux"
    target: str = Field(description="tmux target session:window.pane")
    socket: str | None = Field(default=None, description="tmux socket path (-S); default server")
    host: str | None = Field(default=None, description="host whose worker types into the pane")
    interrupt_key: str = "C-c"
    submit_delay_ms: int = Field(default=150, ge=0, le=10_000)
    token: SecretStr | None = Field(default=None, description="bearer token for MCP over HTTP")


class DiscordConfig(Section):
    enabled: bool = False
    token: SecretStr | None = None
    base_url: str | None = None


class TelegramConfig(Section):
    enabled: bool = False
    token: SecretStr | None = None
    base_url: str | None = None


class TwilioMessagingConfig(Section):
    enabled: bool = False
    account_sid: str | None = None
    auth_token: SecretStr | None = None
    from_number: str | None = None
    base_url: str | None = None


class LocalChatConfig(Section):
    enabled: bool = True


class ChatConfig(Section):
    discord: DiscordConfig = DiscordConfig()
    telegram: TelegramConfig = TelegramConfig()
    whatsapp: TwilioMessagingConfig = TwilioMessagingConfig()
    sms: TwilioMessagingConfig = TwilioMessagingConfig()
    local: LocalChatConfig = LocalChatConfig()
    channels: dict[str, str] = Field(
        default_factory=dict, description='channel id -> agent id, e.g. "telegram:42": "backend"'
    )
    allowed_senders: dict[str, list[str]] = Field(
        default_factory=dict,
        description="provider -> sender ids allowed to reach agents; everyone else is rejected",
    )


class PhoneConfig(Section):
    provider: str = "twilio"
    account_sid: str | None = None
    auth_token: SecretStr | None = None
    from_number: str | None = None
    to_number: str | None = None
    base_url: str | None = None


class TTSConfig(Section):
    provider: str = "elevenlabs"
    api_key: SecretStr | None = None
    voice: str = "Rachel"
    model: str = "eleven_turbo_v2_5"
    base_url: str | None = None


class STTConfig(Section):
    provider: str = "deepgram"
    api_key: SecretStr | None = None
    model: str = "nova-2"
    language: str = "en-US"
    silence_ms: int = Field(default=800, ge=0)
    base_url: str | None = None


class VoiceConfig(Section):
    phone: PhoneConfig = PhoneConfig()
    tts: TTSConfig = TTSConfig()
    stt: STTConfig = STTConfig()
    public_url: str | None = None
    transcript_timeout_s: float = Field(default=180, gt=0)
    ring_timeout_s: float = Field(default=30, gt=0)
    sms_fallback_message: str = (
        "I tried calling but couldn't reach you. Here's my message: {message}"
    )


class LoggingConfig(Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    file: Path | None = None


class Config(Section):
    server: ServerConfig = ServerConfig()
    temporal: TemporalConfig = TemporalConfig()
    database: DatabaseConfig = DatabaseConfig()
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    chat: ChatConfig = ChatConfig()
    voice: VoiceConfig = VoiceConfig()
    logging: LoggingConfig = LoggingConfig()


def host_name() -> str:
    """This machine's name, as used in host task queues (``agentcomms-host-<host>``)."""
    return socket.gethostname()
