"""The ``chat`` section: one subsection per provider, each switched on by ``enabled``."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, SecretStr, field_validator

from agentcomms.config.section import AgentIdKey, Section


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
        default=None,
        description="Discord's API root, e.g. https://discord-proxy.example.com (a proxy, tests): "
        "requests go to <base_url>/api/v10/…, the gateway's URL is asked from "
        "<base_url>/api/v10/gateway/bot; null: https://discord.com",
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
        default=None,
        description="the Bot API's root, e.g. http://127.0.0.1:8081 (a self-hosted Bot API "
        "server, a proxy, tests), without /bot: requests go to <base_url>/bot<token>/METHOD; "
        "null: https://api.telegram.org",
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


class SlackConfig(ProviderSection):
    """Slack through a Slack app: Socket Mode (no public URL) or the Events API over HTTP."""

    bot_token: SecretStr | None = Field(
        default=None,
        description="the bot token, xoxb-… (your app, OAuth & Permissions, Bot User OAuth Token)",
    )
    app_token: SecretStr | None = Field(
        default=None,
        description="socket mode: an app-level token, xapp-…, with connections:write (your app, "
        "Basic Information, App-Level Tokens)",
    )
    signing_secret: SecretStr | None = Field(
        default=None,
        description="http mode: the app's signing secret (Basic Information, App Credentials); "
        "every request to the webhooks is checked against it",
    )
    mode: Literal["socket", "http"] = Field(
        default="socket",
        description="socket: Socket Mode, a WebSocket the gateway opens (no public URL needed); "
        "http: Slack posts to server.public_url + /webhooks/slack/events and "
        "/webhooks/slack/interactivity",
    )
    base_url: str | None = Field(
        default=None,
        description="Slack's Web API root (a proxy, tests); null: https://slack.com/api/",
    )

    def missing_credentials(self) -> list[str]:
        # The bot token sends; receiving needs the app token (socket) or the secret (http).
        needed = ("bot_token", "app_token" if self.mode == "socket" else "signing_secret")
        return [key for key in needed if getattr(self, key) is None]


# ntfy's own rule for a topic's name (it refuses any other).
NTFY_TOPIC = r"^[-_A-Za-z0-9]{1,64}$"


class NtfyConfig(ProviderSection):
    """Push notifications through ntfy (https://ntfy.sh or a server of your own): the human's
    phone subscribes to ``topic``. Approvals come with buttons that answer them through
    ``server.public_url``; without one, the notification says where to answer."""

    credentials: ClassVar[tuple[str, ...]] = ("topic",)

    server: str = Field(
        default="https://ntfy.sh",
        pattern=r"^https?://",
        description="the ntfy server's base URL (self-hosted, or the public https://ntfy.sh)",
    )
    topic: str | None = Field(
        default=None,
        pattern=NTFY_TOPIC,
        description="the topic the human's phone subscribes to (letters, digits, - and _; on the "
        "public server anyone who knows it may read it: make it long and unguessable, or "
        "protect it with an access token)",
    )
    token: SecretStr | None = Field(
        default=None,
        description="an access token (tk_...) for a protected topic, sent as a bearer token; "
        "null: publish without one",
    )
    action_ttl_s: float = Field(
        default=86_400,
        gt=0,
        le=7 * 86_400,
        description="how long an approval's buttons in a notification answer it (each press "
        "answers once; an approval decided or timed out takes no press anyway)",
    )


class IrcConfig(ProviderSection):
    """IRC: a nick of the deployment's on one server, in `channels` and in private messages.
    Senders are allowed by what the server vouches for: ``account:NAME`` (its services account,
    where the server tags messages with it) or the full ``nick!user@host`` mask, never a nick
    alone (anyone may take a free nick)."""

    credentials: ClassVar[tuple[str, ...]] = ("host",)

    host: str | None = Field(default=None, description="the IRC server, e.g. irc.libera.chat")
    port: int = Field(default=6697, ge=1, le=65535, description="6697 with TLS, 6667 without")
    tls: bool = Field(
        default=True, description="connect with TLS (the server's certificate checked)"
    )
    cafile: str | None = Field(
        default=None, description="a CA bundle to check the server's certificate with (self-signed)"
    )
    nick: str = Field(
        default="agentcomms",
        pattern=r"^[A-Za-z\[\]\\`_^{|}][-A-Za-z0-9\[\]\\`_^{|}]{0,29}$",
        description="the deployment's nick (the agents answer as it)",
    )
    channels: list[str] = Field(
        default_factory=list,
        description='channels to join, e.g. ["#ops"]; map each as "irc:#ops" in chat.channels',
    )
    password: SecretStr | None = Field(
        default=None, description="the server's password (PASS), if it asks for one"
    )

    @field_validator("channels")
    @classmethod
    def _channel_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if name[:1] not in ("#", "&") or any(c in name for c in " ,\x07\r\n\0"):
                raise ValueError(
                    f"{name!r} is not a channel: expected a name starting with # (or &) "
                    'without spaces or commas, e.g. "#ops"'
                )
        return value


class MailServerConfig(Section):
    """One mail server the gateway logs in to: IMAP to read, SMTP to send."""

    host: str | None = Field(default=None, description="the server's name, e.g. imap.example.com")
    port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="null: the usual port for tls (IMAP 993 implicit, 143 otherwise; SMTP 465 "
        "implicit, 587 starttls, 25 none)",
    )
    username: str | None = Field(default=None, description="login; null: chat.email.address")
    password: SecretStr | None = Field(default=None, description="login password (app password)")
    tls: Literal["implicit", "starttls", "none"] = Field(
        default="implicit",
        description="implicit: TLS from the first byte; starttls: upgraded before login (refused "
        "if the server does not offer it); none: plain text, for a server on this machine only",
    )
    cafile: str | None = Field(
        default=None,
        description="PEM file of the CA that signed the server's certificate; null: the system's",
    )


class EmailConfig(ProviderSection):
    """Email: IMAP in, SMTP out. Channels are ``email:<the human's address>``; senders are
    allowed by address and by ``Authentication-Results`` from ``trusted_authserv_id``."""

    credentials: ClassVar[tuple[str, ...]] = ("address",)

    address: str | None = Field(
        default=None,
        pattern=r"^[^@\s+]+@[^@\s]+$",
        description="the agents' address (mail is sent from it, as address+<agent>, and read "
        "from its IMAP inbox), e.g. agents@example.com",
    )
    imap: MailServerConfig = Field(
        default_factory=MailServerConfig, description="the server the agents' inbox is read from"
    )
    smtp: MailServerConfig = Field(
        default_factory=lambda: MailServerConfig(tls="starttls"),
        description="the server mail is sent through",
    )
    trusted_authserv_id: str | None = Field(
        default=None,
        description="the authserv-id of your own receiving server's Authentication-Results "
        "header (e.g. mx.example.com); a sender is believed only when that header passes DKIM "
        "or SPF for their address. null: no email is believed, whoever it claims to be from",
    )
    mailbox: str = Field(default="INBOX", description="the IMAP folder read")
    link_ttl_s: float = Field(
        default=86_400,
        gt=0,
        le=7 * 86_400,
        description="how long the one-time link in an approval's email opens it in the "
        "published console (console.public_url); used once, it answers nothing more",
    )
    receipts: Literal["typed", "both", "none"] = Field(
        default="none",
        description="receipts are emails answering the human's: typed (one, once the message "
        "is typed into the pane), both (also one when it is queued), or none",
    )
    poll_s: float = Field(
        default=30.0,
        gt=0,
        description="seconds between looks at the mailbox where the server has no IDLE (and the "
        "longest an IDLE waits before looking again)",
    )

    def problems(self) -> list[tuple[str, str]]:
        """What keeps email from working safely, each (what is wrong, what to do); `doctor`
        shows them."""
        found = []
        if self.trusted_authserv_id is None:
            found.append(
                (
                    "chat.email.trusted_authserv_id is not set, so no sender is believed: every "
                    "email is refused as a stranger's",
                    "set it to the authserv-id your receiving server writes in the "
                    "Authentication-Results header it adds (its first word, e.g. mx.example.com)",
                )
            )
        for side in ("imap", "smtp"):
            server: MailServerConfig = getattr(self, side)
            local = server.host in ("localhost", "127.0.0.1", "::1")
            if server.tls == "none" and server.host is not None and not local:
                found.append(
                    (
                        f"chat.email.{side}.tls is none for {server.host}: the password and every "
                        "message cross the network in plain text",
                        f"set chat.email.{side}.tls to implicit or starttls",
                    )
                )
            if server.cafile is not None and not Path(server.cafile).is_file():
                found.append(
                    (
                        f"chat.email.{side}.cafile {server.cafile} is not a file",
                        "name the PEM file of the CA that signed the server's certificate",
                    )
                )
        return found

    def missing_credentials(self) -> list[str]:
        missing = [key for key in ("address",) if getattr(self, key) is None]
        # A relay on this machine may take mail without a login; reading always needs one.
        needed = {"imap": ("host", "password"), "smtp": ("host",)}
        for side, keys in needed.items():
            server: MailServerConfig = getattr(self, side)
            missing += [f"{side}.{k}" for k in keys if getattr(server, k) is None]
        return missing


class LocalChatConfig(ProviderSection):
    enabled: bool = True


class ChatConfig(Section):
    discord: DiscordConfig = DiscordConfig()
    telegram: TelegramConfig = TelegramConfig()
    whatsapp: WhatsAppConfig = WhatsAppConfig()
    sms: TwilioMessagingConfig = TwilioMessagingConfig()
    slack: SlackConfig = SlackConfig()
    ntfy: NtfyConfig = NtfyConfig()
    irc: IrcConfig = IrcConfig()
    email: EmailConfig = EmailConfig()
    local: LocalChatConfig = LocalChatConfig()
    channels: dict[str, AgentIdKey] = Field(
        default_factory=dict, description='channel id -> agent id, e.g. "telegram:42": "backend"'
    )
    allowed_senders: dict[str, list[str]] = Field(
        default_factory=dict,
        description="provider -> sender ids allowed to reach agents; everyone else is rejected",
    )
    max_file_bytes: int = Field(
        default=5_000_000,
        ge=1,
        le=20_000_000,
        description="the largest photo or document a chat carries to or from an agent, in bytes "
        "(Telegram's Bot API hands out files up to 20 MB)",
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
        # An email address is read in lower case, however a mail client wrote it.
        return {(c.lower() if c.startswith("email:") else c): a for c, a in value.items()}

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
        if "email" in value:
            value = {**value, "email": [address.lower() for address in value["email"]]}
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
