"""The configuration's schema: one pydantic model per section, and :class:`Config` holding them
(the ``chat`` and ``voice`` sections are ``config/chat.py`` and ``config/voice.py``).

Every section forbids unknown keys (a misspelt key is reported, not ignored), and an empty string
in a key whose default is ``null`` reads as "not set".
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    SecretStr,
    StringConstraints,
    field_validator,
    model_validator,
)

from agentcomms.address import DEFAULT_ADDRESS
from agentcomms.bridge.fields import TmuxServer

# The agents' sections live in their own module; re-exported here, where the schema is read.
from agentcomms.config.agents import AgentAcp as AgentAcp
from agentcomms.config.agents import AgentApprovals as AgentApprovals
from agentcomms.config.agents import AgentConfig as AgentConfig
from agentcomms.config.agents import ApprovalsConfig as ApprovalsConfig
from agentcomms.config.agents import Ladder as Ladder
from agentcomms.config.agents import MaxChars as MaxChars
from agentcomms.config.agents import MaxPending as MaxPending
from agentcomms.config.agents import MaxPendingBytes as MaxPendingBytes
from agentcomms.config.agents import NeverRule as NeverRule
from agentcomms.config.budget import Budget
from agentcomms.config.chat import ChatConfig
from agentcomms.config.home import agentcomms_home, default_socket
from agentcomms.config.logs import LoggingConfig
from agentcomms.config.notify import NotifyConfig
from agentcomms.config.section import AgentIdKey, Section
from agentcomms.config.voice import VoiceConfig, phone_approver
from agentcomms.escalation_models import QuietHours, Rung

# The Temporal server's: it ends an idle worker's poll after a minute (the worker polls again).
DEFAULT_LONG_POLL_S = 60

_HOOK_PORT = (
    "Loopback port where the agents' reporting hooks post (Claude Code itself; Codex and "
    "Gemini CLI from the shell they start for a hook: no Python per tool call); null: no "
    "listener, and `install` writes `agentcomms hook` commands. Install again after a change"
)


def published_url(value: str | None) -> str | None:
    """An address others reach a listener at: http(s), without the trailing slash."""
    if value is not None and not value.startswith(("http://", "https://")):
        raise ValueError(f"expected an http:// or https:// URL, not {value!r}")
    return value.rstrip("/") if value else value


class ServerConfig(Section):
    """The gateway: its Unix socket and (later) its HTTP listener for provider webhooks."""

    socket_path: Path | None = Field(
        default=None, description="Unix socket of the gateway; <home>/daemon.sock when unset"
    )
    hooks_socket_path: Path | None = Field(
        default=None,
        description="A second Unix socket for agents' hooks alone, which other Unix users may "
        "open (mode 0666): set it, in a folder they may pass through, for agents that run as "
        "their own user (AGENTCOMMS_SOCKET in their environment names it). It serves only a "
        "process in a registered agent's pane, and only what a hook needs for that pane's "
        "agent. null: none (hooks use socket_path)",
    )
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=8765, ge=0, le=65535)
    hook_port: int | None = Field(8236, ge=0, le=65535, description=_HOOK_PORT)
    public_url: str | None = Field(
        default=None,
        description="Where providers reach the HTTP listener (e.g. a tunnel or proxy, "
        "https://agents.example.com); webhook signatures are checked against it",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="More names the HTTP listeners (webhooks, MCP over HTTP, metrics) answer to in the "
        "Host header, e.g. a DNS alias of this machine (build-box.lan); the bound address, "
        "localhost and public_url's host are always allowed",
    )

    @field_validator("public_url")
    @classmethod
    def _no_trailing_slash(cls, value: str | None) -> str | None:
        return published_url(value)

    def socket(self) -> Path:
        return (self.socket_path or default_socket()).expanduser()


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
    address: str = DEFAULT_ADDRESS
    namespace: str = "default"
    task_queue: str = "agentcomms"
    embedded: bool = Field(
        default=True,
        description="Start `temporal server start-dev` when nothing answers at a local address",
    )
    ui_port: int = Field(default=8233, ge=1, le=65535)
    long_poll_s: int = Field(
        default=DEFAULT_LONG_POLL_S,
        ge=1,
        le=600,
        description="how long the server holds an idle worker's poll (its dynamic config "
        "matching.longPollExpirationInterval; the embedded server is started with it): a host "
        "whose worker has not polled for a quarter longer is shown down",
    )
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


# The mailbox itself refuses past 12,000 waiting messages; a configured limit stays below that.


class MailboxConfig(Section):
    """What may wait for one agent whose pane cannot take it yet. Past a limit a send is
    refused, with the reason; a message once accepted is never dropped."""

    max_pending: MaxPending = Field(default=1000, description="messages waiting per agent")
    max_pending_bytes: MaxPendingBytes = Field(
        default=8_000_000, description="bytes of text waiting per agent"
    )


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


class ConsoleConfig(Section):
    """The local web console the gateway serves: agents, approvals, an agent's story."""

    enabled: bool = Field(default=True, description="serve the console beside the gateway")
    host: Literal["127.0.0.1", "localhost", "::1"] = Field(
        default="127.0.0.1",
        description="loopback only: whoever holds the token may answer approvals and type",
    )
    port: int = Field(default=8235, ge=0, le=65535)
    public_url: str | None = Field(
        default=None,
        description="where the console is reached from elsewhere: a tunnel or proxy in front "
        "of console.port (https://console.example.com). An approval by email then carries a "
        "one-time link that opens that approval there, and answers it once. null: the console "
        "is not published, and emails are answered by reply",
    )

    @field_validator("public_url")
    @classmethod
    def _no_trailing_slash(cls, value: str | None) -> str | None:
        return published_url(value)


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


# A kind's name as a chat writes it after `/new ID DIR`.
KindName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]{0,31}$")]


class AcpConfig(Section):
    """Process agents: ACP agents a host's worker starts and drives (`agents.ID.acp`)."""

    state_dir: Path | None = Field(
        default=None,
        description="where a host keeps each process agent's session id and the messages it "
        "prompted (default: acp/ in the agentcomms folder)",
    )

    roots: list[Path] = Field(
        default_factory=list,
        description="the folders (and everything under them) a chat's `/new ID DIR` may start "
        'an agent in, e.g. ["~/src"]; empty: `/new` is refused. Also written agents.start.roots',
    )
    kinds: dict[KindName, Annotated[list[str], Field(min_length=1)]] = Field(
        default_factory=dict,
        description="agents a chat may start by name beside claude-code, codex and gemini: a "
        'name and the ACP command it runs, e.g. {"goose": ["goose", "acp"]}; a chat names a '
        "kind, never a command. Also written agents.start.kinds",
    )

    tmux_session: str = Field(
        default="agents",
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="the tmux session where a chat's `/new ID DIR KIND --tmux` opens a window "
        "(made when missing)",
    )
    tmux_socket: TmuxServer | None = Field(
        default=None,
        description="the tmux server of those windows: a name as `tmux -L NAME` gives it, or "
        "its socket path; null: the default server",
    )

    @field_validator("roots")
    @classmethod
    def _absolute_roots(cls, value: list[Path]) -> list[Path]:
        for root in value:
            if not root.expanduser().is_absolute():
                raise ValueError(f"{root} is not an absolute path (write /home/me/src or ~/src)")
        return value

    def state_root(self) -> Path:
        return (self.state_dir or agentcomms_home() / "acp").expanduser()

    def resolved_roots(self) -> list[Path]:
        """The roots as the file system has them: symlinks followed, `~` expanded."""
        return [root.expanduser().resolve() for root in self.roots]


class Config(Section):
    server: ServerConfig = ServerConfig()
    temporal: TemporalConfig = TemporalConfig()
    database: DatabaseConfig = DatabaseConfig()
    mailbox: MailboxConfig = MailboxConfig()
    approvals: ApprovalsConfig = ApprovalsConfig()
    escalation: Ladder = Field(
        default_factory=list,
        description="how a request nobody answers finds its human: rungs of {after_s, via} "
        "(via chat, sms, push or call); empty: the chat only, as always",
    )
    quiet_hours: QuietHours | None = Field(
        default=None,
        description="{from, to, tz}: a ladder's rungs past the first wait for the end of these "
        "hours (an urgent message and a never_sleep agent excepted)",
    )
    budget: Budget = Budget()
    agents: dict[AgentIdKey, AgentConfig] = Field(default_factory=dict)
    chat: ChatConfig = ChatConfig()
    notify: NotifyConfig = NotifyConfig()
    voice: VoiceConfig = VoiceConfig()
    acp: AcpConfig = AcpConfig()
    logging: LoggingConfig = LoggingConfig()
    metrics: MetricsConfig = MetricsConfig()
    console: ConsoleConfig = ConsoleConfig()
    security: SecurityConfig = SecurityConfig()

    @model_validator(mode="before")
    @classmethod
    def _agents_start(cls, data: Any) -> Any:
        # `agents.start` is where the chat commands' settings are read as the manual first
        # named them; it is no agent (`agents start` is a command), and lives in `acp`.
        if not isinstance(data, dict) or not isinstance(data.get("agents"), dict):
            return data
        agents = dict(data["agents"])
        start = agents.pop("start", None)
        if start is None:
            return data
        if not isinstance(start, dict) or not set(start) <= {"roots", "kinds"}:
            raise ValueError(
                "agents.start holds the chat commands' roots and kinds (no agent may be "
                "named start): write roots and kinds only, or set acp.roots and acp.kinds"
            )
        acp = dict(data.get("acp") or {})
        for key, value in start.items():
            if key in acp:
                raise ValueError(f"agents.start.{key} and acp.{key} both set: keep one")
            acp[key] = value
        return {**data, "agents": agents, "acp": acp}

    def never_rules(self, agent_id: str | None) -> list[str]:
        """The calls `agent_id`'s hooks refuse without asking: everyone's, then its own."""
        agent = self.agents.get(agent_id) if agent_id else None
        own = agent.approvals.never if agent else []
        return list(dict.fromkeys([*self.approvals.never, *own]))

    def approval_on_timeout(self, agent_id: str) -> Literal["terminal", "deny"]:
        """What a permission request of `agent_id` comes to when no one answers in time."""
        agent = self.agents.get(agent_id)
        return (agent and agent.approvals.on_timeout) or self.approvals.on_timeout

    def approvers(self, agent_id: str) -> list[str] | None:
        """Who may answer `agent_id`'s approvals from a chat (PROVIDER:SENDER); None: every
        allowed sender in a chat mapped to it."""
        agent = self.agents.get(agent_id)
        return agent.approvers if agent is not None else None

    def phone_hears(self, agent_id: str, phone: str) -> bool:
        """Whether the phone `phone` (its number, or LOCAL_PHONE) hears and answers `agent_id`'s
        requests: every phone when the agent names no approvers, else only one listed there
        (phone:NUMBER, phone:local). The PIN says who is calling, not whose requests they
        may decide."""
        approvers = self.approvers(agent_id)
        return approvers is None or phone_approver(phone) in approvers

    def mirror(self, agent_id: str) -> Literal["replies", "all", "off"]:
        """Which of `agent_id`'s turns end with its last words sent back to chat."""
        agent = self.agents.get(agent_id)
        return agent.mirror if agent is not None else "replies"

    def escalation_for(self, agent_id: str) -> tuple[list[Rung], QuietHours | None, bool]:
        """(rungs, quiet hours, never sleeps) of `agent_id`'s ladder: its own, else everyone's."""
        agent = self.agents.get(agent_id)
        rungs = agent.escalation if agent and agent.escalation is not None else self.escalation
        quiet = (agent and agent.quiet_hours) or self.quiet_hours
        return rungs, quiet, bool(agent and agent.never_sleep)

    def mailbox_limits(self, agent_id: str) -> tuple[int, int]:
        """(messages, bytes) that may wait for `agent_id`: its own limits, else the defaults."""
        agent = self.agents.get(agent_id)
        return (
            (agent and agent.max_pending) or self.mailbox.max_pending,
            (agent and agent.max_pending_bytes) or self.mailbox.max_pending_bytes,
        )
