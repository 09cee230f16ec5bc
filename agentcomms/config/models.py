"""The configuration's schema: one pydantic model per section, and :class:`Config` holding them.

Every section forbids unknown keys (a misspelt key is reported, not ignored), and an empty string
in a key whose default is ``null`` reads as "not set".
"""

from __future__ import annotations

import base64
import binascii
import difflib
import typing
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from agentcomms.bridge.fields import InterruptKey, TmuxSocket, TmuxTarget
from agentcomms.config.home import agentcomms_home
from agentcomms.ids import check_agent_id
from agentcomms.models import MAX_MESSAGE_CHARS


class Section(BaseModel):
    # A misspelt key is a mistake the user wants to hear about, not a silently ignored one.
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _empty_string_means_unset(cls, data: Any) -> Any:
        # `"token": "${TELEGRAM_BOT_TOKEN:-}"` with the variable unset must read as "no token",
        # not as a configured empty token (and an empty path must not become ".").
        if not isinstance(data, dict):
            return data
        unset = [
            name
            for name, info in cls.model_fields.items()
            if data.get(name) == "" and not info.is_required() and info.default is None
        ]
        return {**data, **dict.fromkeys(unset)} if unset else data


class ServerConfig(Section):
    """The gateway: its Unix socket and (later) its HTTP listener for provider webhooks."""

    socket_path: Path | None = Field(
        default=None, description="Unix socket of the gateway; <home>/daemon.sock when unset"
    )
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=8765, ge=0, le=65535)
    public_url: str | None = Field(
        default=None,
        description="Where providers reach the HTTP listener (e.g. a tunnel or proxy, "
        "https://agents.example.com); webhook signatures are checked against it",
    )

    @field_validator("public_url")
    @classmethod
    def _no_trailing_slash(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"expected an http:// or https:// URL, not {value!r}")
        return value.rstrip("/") if value else value

    def socket(self) -> Path:
        return (self.socket_path or agentcomms_home() / "daemon.sock").expanduser()


AES_KEY_BYTES = 32
_KEY_ID = r"^[A-Za-z0-9._-]{1,64}$"


class EncryptionKey(Section):
    """One AES-256 key for Temporal payloads, named so a payload says which key sealed it."""

    id: str = Field(pattern=_KEY_ID, description="a name for the key, kept in each payload")
    key: SecretStr = Field(description='32 random bytes in base64, normally "${VAR}"')

    @field_validator("key")
    @classmethod
    def _thirty_two_bytes(cls, value: SecretStr) -> SecretStr:
        try:
            raw = base64.b64decode(value.get_secret_value(), validate=True)
        except (binascii.Error, ValueError):
            raw = None
        if raw is None or len(raw) != AES_KEY_BYTES:
            got = "not base64" if raw is None else f"{len(raw)} bytes"
            raise ValueError(
                f"expected {AES_KEY_BYTES} bytes in base64 ({got}); make one with: "
                "python3 -c 'import base64, os; print(base64.b64encode(os.urandom(32)).decode())'"
            )
        return value

    def secret(self) -> bytes:
        return base64.b64decode(self.key.get_secret_value())


class CodecServerConfig(Section):
    """`agentcomms codec-server`: decrypts payloads for the Temporal UI, for whoever has its token."""

    host: str = "127.0.0.1"
    port: int = Field(default=8234, ge=0, le=65535)
    token: SecretStr | None = Field(
        default=None,
        description="required of every request (Authorization: Bearer, or as the URL's first "
        "path segment for a UI that sends no header); null: generated into "
        "<home>/codec-server.token",
    )
    origins: list[str] = Field(
        default_factory=list,
        description="browser origins allowed to call it (CORS); empty: the embedded UI's, "
        "http://127.0.0.1:<ui_port> and http://localhost:<ui_port>",
    )


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
    api_key: SecretStr | None = Field(
        default=None, description="Temporal Cloud API key (sent as a bearer token; implies TLS)"
    )
    tls: bool | None = Field(
        default=None,
        description="true: TLS to the server; null: TLS when an api_key or a tls_* key is set",
    )
    tls_server_ca: Path | None = Field(
        default=None,
        description="PEM file of the CA that signed the server's certificate; null: the "
        "system's trusted CAs (enough for Temporal Cloud)",
    )
    tls_client_cert: Path | None = Field(
        default=None, description="mTLS: PEM file of this process's client certificate"
    )
    tls_client_key: Path | None = Field(
        default=None, description="mTLS: PEM file of the client certificate's private key"
    )
    tls_server_name: str | None = Field(
        default=None,
        description="name the server's certificate is checked against (and sent as SNI) when "
        "it differs from the address's host",
    )
    encryption_keys: list[EncryptionKey] = Field(
        default_factory=list,
        description="with keys, every payload is encrypted (AES-GCM) before Temporal sees it; "
        "the first key encrypts, all decrypt, so a new key goes first and old ones stay "
        "until their histories are gone",
    )
    codec_server: CodecServerConfig = CodecServerConfig()

    @field_validator("encryption_keys")
    @classmethod
    def _distinct_ids(cls, value: list[EncryptionKey]) -> list[EncryptionKey]:
        ids = [k.id for k in value]
        if len(set(ids)) != len(ids):
            raise ValueError(f"each key needs an id of its own, got {ids}")
        return value

    @model_validator(mode="after")
    def _tls_keys_agree(self) -> TemporalConfig:
        if (self.tls_client_cert is None) != (self.tls_client_key is None):
            given, missing = (
                ("tls_client_cert", "tls_client_key")
                if self.tls_client_key is None
                else ("tls_client_key", "tls_client_cert")
            )
            raise ValueError(
                f"{given} is set but {missing} is not: mTLS needs the certificate and its key"
            )
        if self.tls is False:
            tls_keys = [k for k in _TLS_KEYS if getattr(self, k) is not None]
            if tls_keys:
                raise ValueError(
                    f"tls is false but {', '.join(tls_keys)} is set: set tls to true (or "
                    "null), or remove them"
                )
        return self

    def uses_tls(self) -> bool:
        """Whether to speak TLS: as `tls` says, else when anything TLS-only is configured
        (Temporal Cloud takes an API key only over TLS)."""
        if self.tls is not None:
            return self.tls
        return self.api_key is not None or any(getattr(self, key) is not None for key in _TLS_KEYS)

    def dev_db_path(self) -> Path:
        return (self.db_filename or agentcomms_home() / "temporal.db").expanduser()


_TLS_KEYS = ("tls_server_ca", "tls_client_cert", "tls_client_key", "tls_server_name")


class DatabaseConfig(Section):
    url: str | None = Field(
        default=None, description="SQLAlchemy async URL; a SQLite file in the home when unset"
    )

    def resolved_url(self) -> str:
        return self.url or f"sqlite+aiosqlite:///{agentcomms_home() / 'agentcomms.db'}"


AgentIdKey = Annotated[str, AfterValidator(check_agent_id)]
# The mailbox itself refuses past 12,000 waiting messages; a configured limit stays below that.
MaxPending = Annotated[int, Field(ge=1, le=10_000)]
MaxPendingBytes = Annotated[int, Field(ge=MAX_MESSAGE_CHARS * 4, le=1_000_000_000)]
MaxChars = Annotated[int, Field(ge=100, le=MAX_MESSAGE_CHARS)]


class MailboxConfig(Section):
    """What may wait for one agent whose pane cannot take it yet. Past a limit a send is
    refused, with the reason; a message once accepted is never dropped."""

    max_pending: MaxPending = Field(default=1000, description="messages waiting per agent")
    max_pending_bytes: MaxPendingBytes = Field(
        default=8_000_000, description="bytes of text waiting per agent"
    )


class AgentConfig(Section):
    """An agent registered when agentcomms starts."""

    type: Literal["tmux"] = "tmux"
    # Checked with the bridge's own rules, so `config validate` catches what typing would refuse.
    target: TmuxTarget = Field(description="tmux target session:window.pane")
    socket: TmuxSocket | None = Field(
        default=None, description="tmux socket path (-S); default server"
    )
    host: str | None = Field(default=None, description="host whose worker types into the pane")
    interrupt_key: InterruptKey = Field(
        default="C-c", description="C-a … C-z, M-a … M-z, Escape, Enter, Tab, F1 … F12"
    )
    submit_delay_ms: int = Field(default=150, ge=0, le=10_000)
    max_chars: MaxChars = Field(
        default=MAX_MESSAGE_CHARS,
        description="longest text typed into the pane; longer text is cut, visibly",
    )
    max_pending: MaxPending | None = Field(
        default=None, description="overrides mailbox.max_pending"
    )
    max_pending_bytes: MaxPendingBytes | None = Field(
        default=None, description="overrides mailbox.max_pending_bytes"
    )
    token: SecretStr | None = Field(default=None, description="bearer token for MCP over HTTP")


class ProviderSection(Section):
    """A chat provider's section: switched on by ``enabled``, reached at ``base_url``."""

    # The keys a provider cannot connect without (`config validate` warns when one is unset).
    credentials: ClassVar[tuple[str, ...]] = ()

    enabled: bool = False

    def missing_credentials(self) -> list[str]:
        return [key for key in self.credentials if getattr(self, key) is None]


class DiscordConfig(ProviderSection):
    credentials: ClassVar[tuple[str, ...]] = ("token",)

    token: SecretStr | None = Field(
        default=None, description="bot token (developer portal: your application, Bot, Token)"
    )
    guild_id: str | None = Field(
        default=None,
        pattern=r"^[0-9]+$",
        description="the server (guild) whose channels reach agents; messages from other "
        "servers are ignored (direct messages always count); null: every server the bot is in",
    )
    base_url: str | None = Field(
        default=None, description="Discord's API root (a proxy, tests); null: https://discord.com"
    )

    @field_validator("guild_id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        # Discord ids are 64-bit: written as a JSON number they still mean the same server.
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class TelegramConfig(ProviderSection):
    credentials: ClassVar[tuple[str, ...]] = ("token",)

    token: SecretStr | None = None
    base_url: str | None = Field(
        default=None, description="Bot API server (self-hosted, proxy, tests); null: Telegram's"
    )
    mode: Literal["polling", "webhook"] = Field(
        default="polling",
        description="polling: long-poll getUpdates (no public URL needed); webhook: Telegram "
        "posts to server.public_url + /webhooks/telegram",
    )
    webhook_secret: SecretStr | None = Field(
        default=None,
        description="webhook mode: the secret Telegram sends in X-Telegram-Bot-Api-Secret-Token",
    )


class TwilioMessagingConfig(ProviderSection):
    credentials: ClassVar[tuple[str, ...]] = ("account_sid", "auth_token")

    account_sid: str | None = None
    auth_token: SecretStr | None = None
    from_number: str | None = None
    base_url: str | None = None
    receipts: Literal["typed", "both", "none"] = Field(
        default="typed",
        description="through Twilio, receipts are texts, each one billed: typed (one, once the "
        "message is typed into the pane), both (also one when it is queued), or none",
    )


class WhatsAppConfig(TwilioMessagingConfig):
    """WhatsApp through Twilio (the keys above) or through Meta's WhatsApp Business Cloud API.

    One provider either way: channels are ``whatsapp:+15551234567`` and the allowlist holds phone
    numbers, so switching ``api`` keeps every mapping and every admitted sender.
    """

    api: Literal["twilio", "cloud"] = Field(
        default="twilio",
        description="twilio: Twilio's Messaging API (account_sid, auth_token, from_number); "
        "cloud: Meta's WhatsApp Business Cloud API (access_token, phone_number_id, app_secret, "
        "verify_token), webhook at server.public_url + /webhooks/whatsapp",
    )
    access_token: SecretStr | None = Field(
        default=None,
        description="cloud: a system user's access token with whatsapp_business_messaging",
    )
    phone_number_id: str | None = Field(
        default=None, description="cloud: the id of the business phone number (not the number)"
    )
    app_secret: SecretStr | None = Field(
        default=None, description="cloud: the Meta app's secret, which signs every webhook call"
    )
    verify_token: SecretStr | None = Field(
        default=None,
        description="cloud: any string you choose, given again in the app's webhook settings",
    )
    api_version: str = Field(default="v23.0", description="cloud: the Graph API version")

    def missing_credentials(self) -> list[str]:
        # The keys a sender needs; the webhook's own (app_secret, verify_token) are
        # webhook_problems, since sending works without them.
        keys = ("access_token", "phone_number_id") if self.api == "cloud" else self.credentials
        return [key for key in keys if getattr(self, key) is None]

    def webhook_problems(self, public_url: str | None) -> list[str]:
        """What keeps the Cloud API's webhook from working, each with what to set."""
        if self.api != "cloud":
            return []
        problems = []
        if self.app_secret is None:
            problems.append(
                "chat.whatsapp.app_secret is not set, so no webhook call can be verified "
                "(the App secret under App settings > Basic)"
            )
        if self.verify_token is None:
            problems.append(
                "chat.whatsapp.verify_token is not set, so Meta cannot verify the webhook "
                "(choose one and give it again in the app's webhook settings)"
            )
        if public_url is None:
            problems.append(
                "server.public_url is not set: Meta must reach "
                "<public_url>/webhooks/whatsapp over HTTPS"
            )
        return problems


class LocalChatConfig(ProviderSection):
    enabled: bool = True


class ChatConfig(Section):
    discord: DiscordConfig = DiscordConfig()
    telegram: TelegramConfig = TelegramConfig()
    whatsapp: WhatsAppConfig = WhatsAppConfig()
    sms: TwilioMessagingConfig = TwilioMessagingConfig()
    local: LocalChatConfig = LocalChatConfig()
    channels: dict[str, AgentIdKey] = Field(
        default_factory=dict, description='channel id -> agent id, e.g. "telegram:42": "backend"'
    )
    allowed_senders: dict[str, list[str]] = Field(
        default_factory=dict,
        description="provider -> sender ids allowed to reach agents; everyone else is rejected",
    )

    @field_validator("channels")
    @classmethod
    def _channel_ids(cls, value: dict[str, str]) -> dict[str, str]:
        for channel in value:
            provider, sep, chat = channel.partition(":")
            if not sep or not chat or provider not in cls.provider_names():
                raise ValueError(
                    f"{channel!r} is not a channel id: expected PROVIDER:CHAT, e.g. "
                    '"telegram:456" (the chat id Telegram gives)'
                )
        return value

    @field_validator("allowed_senders")
    @classmethod
    def _allowed_providers(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        # A misspelt provider would otherwise leave its senders shut out, silently.
        known = cls.provider_names()
        for provider in value:
            if provider not in known:
                close = difflib.get_close_matches(provider, known, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ValueError(
                    f"{provider!r} is not a provider ({hint}known: {', '.join(known)})"
                )
        return value

    @classmethod
    def provider_names(cls) -> list[str]:
        """The providers with a section here (agentcomms.transports.PROVIDERS, in its order)."""
        return [
            name
            for name, info in cls.model_fields.items()
            if isinstance(info.default, ProviderSection)
        ]

    def provider(self, name: str) -> ProviderSection:
        """The section of provider ``name`` (one of ``agentcomms.transports.PROVIDERS``)."""
        section = getattr(self, name)
        assert isinstance(section, ProviderSection), name
        return section


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


class LoggingConfig(Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    file: Path | None = None
    format: Literal["text", "json"] = Field(
        default="text",
        description="text: one readable line per record; json: one JSON object per line (event, "
        "agent and workflow ids as fields) for log shippers",
    )

    @field_validator("level", mode="before")
    @classmethod
    def _any_case(cls, value: Any) -> Any:
        # "info" is what people type; keep anything else as written so the error quotes it.
        if isinstance(value, str) and value.upper() in typing.get_args(
            cls.model_fields["level"].annotation
        ):
            return value.upper()
        return value


class MetricsConfig(Section):
    """Prometheus metrics (ours and the Temporal SDK's) served by the worker and the gateway."""

    address: str | None = Field(
        default=None,
        description="HOST:PORT to serve /metrics on, e.g. 127.0.0.1:9464; unset: no metrics",
    )

    @field_validator("address")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is not None:
            host, _, port = value.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"expected HOST:PORT, e.g. 127.0.0.1:9464, not {value!r}")
        return value


# An HMAC key shorter than this is guessable; a generated one has 43 characters.
MIN_DEPLOYMENT_KEY_CHARS = 32


class SecurityConfig(Section):
    """What makes agentcomms, and no one else who reaches Temporal, able to make a pane type."""

    deployment_key: SecretStr | None = Field(
        default=None,
        description="signs every message and registration before Temporal sees it; the pane's "
        "host types only what it can verify. null: generated into <home>/deployment.key at "
        'first start. Hosts of one deployment share one: "${DEPLOYMENT_KEY}"',
    )

    @field_validator("deployment_key")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < MIN_DEPLOYMENT_KEY_CHARS:
            raise ValueError(
                f"expected at least {MIN_DEPLOYMENT_KEY_CHARS} characters (a short key can be "
                "guessed); make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
            )
        return value


class Config(Section):
    server: ServerConfig = ServerConfig()
    temporal: TemporalConfig = TemporalConfig()
    database: DatabaseConfig = DatabaseConfig()
    mailbox: MailboxConfig = MailboxConfig()
    agents: dict[AgentIdKey, AgentConfig] = Field(default_factory=dict)
    chat: ChatConfig = ChatConfig()
    voice: VoiceConfig = VoiceConfig()
    logging: LoggingConfig = LoggingConfig()
    metrics: MetricsConfig = MetricsConfig()
    security: SecurityConfig = SecurityConfig()

    def mailbox_limits(self, agent_id: str) -> tuple[int, int]:
        """(messages, bytes) that may wait for `agent_id`: its own limits, else the defaults."""
        agent = self.agents.get(agent_id)
        return (
            (agent and agent.max_pending) or self.mailbox.max_pending,
            (agent and agent.max_pending_bytes) or self.mailbox.max_pending_bytes,
        )
