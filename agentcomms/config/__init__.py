"""The one configuration file: ``~/.agentcomms/config.json``.

Every process (up, worker, gateway, mcp, the CLI) reads the same file through :func:`load_config`.
``AGENTCOMMS_HOME`` moves the whole directory, which is how tests get a private one.

How a file becomes a :class:`Config`, in order (:mod:`.loading` runs the steps):

1. The file must not be accessible to other users (it holds secrets): mode 0600, and the home
   directory must not be writable by others. Anything looser is refused with the ``chmod`` to run.
2. It is parsed as JSON. Keys starting with ``//`` are comments and are dropped, at any depth.
3. ``${VAR}`` and ``${VAR:-default}`` are expanded inside string values (never keys), after parsing
   (:mod:`.expand`).
4. ``AGENTCOMMS_<SECTION>__<KEY>[__<KEY>…]`` environment variables override keys (see
   :func:`env_overrides`); the older ``AGENTCALL_*`` names work too, with lower precedence.
5. The result is validated against :mod:`.models`; an empty string in a key whose default is
   ``null`` means "not set".

Every problem found is reported at once, one line each, naming the file (or the environment
variable), the key path and what was expected — and never echoing a secret (:mod:`.problems`,
:mod:`.redact`). :mod:`.home` holds the directory and the private-file writer.

Names are imported from their modules when first used, so a client that needs only the gateway's
socket (:mod:`.reading`, standard library only) does not load the schema and pydantic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentcomms.config.chat import (
        ChatConfig,
        DiscordConfig,
        IrcConfig,
        LocalChatConfig,
        NtfyConfig,
        SlackConfig,
        TelegramConfig,
        TwilioMessagingConfig,
        WhatsAppConfig,
    )
    from agentcomms.config.env import (
        ENV_PREFIX,
        LEGACY_ENV_PREFIX,
        env_override_hints,
        env_overrides,
    )
    from agentcomms.config.expand import COMMENT_PREFIX
    from agentcomms.config.home import (
        CONFIG_FILENAME,
        DEFAULT_HOME,
        HOME_ENV,
        agentcomms_home,
        default_config_path,
        ensure_home,
        host_name,
        write_private_file,
    )
    from agentcomms.config.keys import Loc
    from agentcomms.config.loading import (
        ResolvedConfig,
        load_config,
        load_sections,
        resolve_config,
    )
    from agentcomms.config.logs import LoggingConfig
    from agentcomms.config.models import (
        AcpConfig,
        AgentConfig,
        CodecServerConfig,
        Config,
        ConsoleConfig,
        DatabaseConfig,
        EncryptionKey,
        MailboxConfig,
        MetricsConfig,
        SecurityConfig,
        ServerConfig,
        TemporalConfig,
    )
    from agentcomms.config.reading import gateway_socket
    from agentcomms.config.redact import REDACTED, is_secret_key, mask_url_password, redacted
    from agentcomms.config.section import Section
    from agentcomms.config.voice import (
        PhoneConfig,
        SpeechAccount,
        STTConfig,
        TTSConfig,
        VoiceConfig,
    )

# Each public name and the module that defines it.
_HOME: dict[str, str] = {
    "ChatConfig": "chat",
    "DiscordConfig": "chat",
    "IrcConfig": "chat",
    "LocalChatConfig": "chat",
    "SlackConfig": "chat",
    "NtfyConfig": "chat",
    "TelegramConfig": "chat",
    "TwilioMessagingConfig": "chat",
    "WhatsAppConfig": "chat",
    "ENV_PREFIX": "env",
    "LEGACY_ENV_PREFIX": "env",
    "env_override_hints": "env",
    "env_overrides": "env",
    "COMMENT_PREFIX": "expand",
    "CONFIG_FILENAME": "home",
    "DEFAULT_HOME": "home",
    "HOME_ENV": "home",
    "agentcomms_home": "home",
    "default_config_path": "home",
    "ensure_home": "home",
    "host_name": "home",
    "write_private_file": "home",
    "Loc": "keys",
    "ResolvedConfig": "loading",
    "load_config": "loading",
    "resolve_config": "loading",
    "load_sections": "loading",
    "gateway_socket": "reading",
    "AcpConfig": "models",
    "AgentConfig": "models",
    "CodecServerConfig": "models",
    "Config": "models",
    "ConsoleConfig": "models",
    "DatabaseConfig": "models",
    "EncryptionKey": "models",
    "LoggingConfig": "logs",
    "MailboxConfig": "models",
    "MetricsConfig": "models",
    "SecurityConfig": "models",
    "ServerConfig": "models",
    "TemporalConfig": "models",
    "REDACTED": "redact",
    "is_secret_key": "redact",
    "mask_url_password": "redact",
    "redacted": "redact",
    "Section": "section",
    "PhoneConfig": "voice",
    "SpeechAccount": "voice",
    "STTConfig": "voice",
    "TTSConfig": "voice",
    "VoiceConfig": "voice",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "COMMENT_PREFIX",
    "CONFIG_FILENAME",
    "DEFAULT_HOME",
    "ENV_PREFIX",
    "HOME_ENV",
    "LEGACY_ENV_PREFIX",
    "REDACTED",
    "AcpConfig",
    "AgentConfig",
    "ChatConfig",
    "CodecServerConfig",
    "Config",
    "ConsoleConfig",
    "DatabaseConfig",
    "DiscordConfig",
    "EncryptionKey",
    "IrcConfig",
    "Loc",
    "LocalChatConfig",
    "LoggingConfig",
    "MailboxConfig",
    "MetricsConfig",
    "NtfyConfig",
    "PhoneConfig",
    "ResolvedConfig",
    "STTConfig",
    "Section",
    "SecurityConfig",
    "ServerConfig",
    "SlackConfig",
    "SpeechAccount",
    "TTSConfig",
    "TelegramConfig",
    "TemporalConfig",
    "TwilioMessagingConfig",
    "VoiceConfig",
    "WhatsAppConfig",
    "agentcomms_home",
    "default_config_path",
    "ensure_home",
    "env_override_hints",
    "env_overrides",
    "gateway_socket",
    "host_name",
    "is_secret_key",
    "load_config",
    "load_sections",
    "mask_url_password",
    "redacted",
    "resolve_config",
    "write_private_file",
]
