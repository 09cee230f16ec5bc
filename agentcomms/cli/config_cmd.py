"""``agentcomms config init | validate | show``: write, check and print the configuration file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.markup import escape
from rich.text import Text

from agentcomms.cli import app
from agentcomms.cli.common import JsonOption, ask_gateway, console, fail, print_json
from agentcomms.config import (
    Config,
    ResolvedConfig,
    default_config_path,
    env_override_hints,
    redacted,
    resolve_config,
    write_private_file,
)
from agentcomms.errors import ConfigError
from agentcomms.transports import PROVIDERS

config_app = typer.Typer(
    name="config",
    no_args_is_help=True,
    help="""Write, check and print the configuration.

The file is ~/.agentcomms/config.json: directory 0700, file 0600 (a file
other users can read is refused). AGENTCOMMS_HOME=DIR moves the whole
directory. With no file, defaults apply.

Secrets stay out of the file. A string value may say "${TELEGRAM_BOT_TOKEN}",
expanded from the environment when the file is read (unset is an error
naming the key), or "${VAR:-default}", which takes the default when VAR is
unset or empty, e.g. "${TELEGRAM_BOT_TOKEN:-}". An empty value means
"not set". Write $${ for a literal ${. Keys starting with // are comments.

Environment variables override keys: AGENTCOMMS_SECTION__KEY, with a double
underscore between levels, e.g.
  AGENTCOMMS_TEMPORAL__ADDRESS=host:7233
  AGENTCOMMS_AGENTS__BACKEND__TARGET=dev:0.1
  AGENTCOMMS_CHAT__ALLOWED_SENDERS__TELEGRAM='["42"]'
Values are read as JSON when they parse (9000, true, a list), else as text;
string keys always take the text. Only names whose first part is a section
(server, temporal, database, mailbox, agents, chat, voice, logging, metrics,
security) count, so
AGENTCOMMS_HOME and the like are not keys. The older AGENTCALL_* names work
too; AGENTCOMMS_* wins.""",
)
app.add_typer(config_app, name="config")

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Configuration file to read; default $AGENTCOMMS_HOME/config.json",
        show_default=False,
    ),
]

# Where each secret comes from in the full starter file: never a literal, always the environment.
_SECRET_REFERENCES: dict[tuple[str, ...], str] = {
    ("temporal", "api_key"): "TEMPORAL_API_KEY",
    ("security", "deployment_key"): "DEPLOYMENT_KEY",
    ("chat", "discord", "token"): "DISCORD_BOT_TOKEN",
    ("chat", "telegram", "token"): "TELEGRAM_BOT_TOKEN",
    ("chat", "telegram", "webhook_secret"): "TELEGRAM_WEBHOOK_SECRET",
    ("chat", "slack", "bot_token"): "SLACK_BOT_TOKEN",
    ("chat", "slack", "app_token"): "SLACK_APP_TOKEN",
    ("chat", "slack", "signing_secret"): "SLACK_SIGNING_SECRET",
    ("chat", "whatsapp", "account_sid"): "TWILIO_ACCOUNT_SID",
    ("chat", "whatsapp", "auth_token"): "TWILIO_AUTH_TOKEN",
    ("chat", "whatsapp", "access_token"): "WHATSAPP_ACCESS_TOKEN",
    ("chat", "whatsapp", "app_secret"): "WHATSAPP_APP_SECRET",
    ("chat", "whatsapp", "verify_token"): "WHATSAPP_VERIFY_TOKEN",
    ("chat", "sms", "account_sid"): "TWILIO_ACCOUNT_SID",
    ("chat", "sms", "auth_token"): "TWILIO_AUTH_TOKEN",
    ("chat", "email", "imap", "password"): "EMAIL_IMAP_PASSWORD",
    ("chat", "email", "smtp", "password"): "EMAIL_SMTP_PASSWORD",
    ("voice", "phone", "account_sid"): "TWILIO_ACCOUNT_SID",
    ("voice", "phone", "auth_token"): "TWILIO_AUTH_TOKEN",
    # One key per speech account serves speaking and hearing, whichever chain names it.
    ("voice", "elevenlabs", "api_key"): "ELEVENLABS_API_KEY",
    ("voice", "deepgram", "api_key"): "DEEPGRAM_API_KEY",
    ("voice", "openai", "api_key"): "OPENAI_API_KEY",
}

_COMMENTS: dict[tuple[str, ...], str] = {
    (): 'agentcomms configuration. Keys starting with // are comments. "${VAR}" reads an '
    'environment variable, "${VAR:-default}" falls back to a default, an empty value means '
    "not set. AGENTCOMMS_SECTION__KEY=value overrides any key. Check with: "
    "agentcomms config validate",
    ("server",): "The gateway: a Unix socket for local processes (null: <home>/daemon.sock) "
    "and an HTTP listener for provider webhooks on http_host:http_port; public_url is where "
    "providers reach that listener (a tunnel or proxy), and webhook signatures are checked "
    "against it.",
    ("temporal",): "The Temporal server. With embedded true and a local address, a dev server "
    "is started when none answers (its database: <home>/temporal.db when db_filename is null). "
    "Temporal Cloud: api_key (TLS follows). A cluster with its own CA: tls_server_ca; with mTLS: "
    "tls_client_cert and tls_client_key (PEM files).",
    ("database",): "url null: a SQLite file in the home. PostgreSQL: "
    '"postgresql+asyncpg://user:${PGPASSWORD}@host/agentcomms".',
    ("mailbox",): "What may wait for one agent whose pane cannot take it yet; past a limit a "
    "send is refused with the reason (an accepted message is never dropped).",
    ("budget",): "What each agent may spend in an hour: calls placed, SMS and WhatsApp "
    "messages sent, escalation ladders that text or call; past it a request is refused with "
    "the reason. agents.ID.budget replaces it for one agent.",
    ("agents",): "Agents registered at start, by id, e.g. "
    '"backend": {"target": "dev:0.1"} types into tmux pane dev:0.1. max_chars cuts longer '
    "text (visibly); max_pending and max_pending_bytes override the mailbox limits.",
    ("chat",): "Only enabled providers connect; base_url null means the provider's own API. "
    'channels maps a channel id to an agent id, e.g. "telegram:42": "backend"; '
    "allowed_senders maps a provider to the sender ids allowed to reach agents.",
    ("chat", "local"): "The offline channel on this machine (channel id cli:local).",
    ("chat", "telegram"): "Bot token from @BotFather, in the TELEGRAM_BOT_TOKEN variable. mode "
    "polling needs no public URL; mode webhook needs server.public_url and a webhook_secret.",
    ("chat", "discord"): "Bot token from the Discord developer portal, in DISCORD_BOT_TOKEN.",
    ("chat", "slack"): "A Slack app (create it from `agentcomms config init --slack-manifest`): "
    "its bot token in SLACK_BOT_TOKEN; mode socket needs an app-level token in SLACK_APP_TOKEN "
    "and no public URL; mode http needs the signing secret in SLACK_SIGNING_SECRET and "
    "server.public_url. Channels: slack:<channel id>; senders: Slack user ids (U…).",
    ("chat", "whatsapp"): "api twilio: Twilio credentials in TWILIO_ACCOUNT_SID and "
    "TWILIO_AUTH_TOKEN. api cloud: Meta's Cloud API, with access_token, phone_number_id, "
    "app_secret and verify_token; its webhook is server.public_url + /webhooks/whatsapp.",
    ("chat", "sms"): "Twilio credentials in TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN.",
    ("chat", "email"): "IMAP in, SMTP out, from address (each agent from address+<agent>); "
    "passwords in EMAIL_IMAP_PASSWORD and EMAIL_SMTP_PASSWORD. trusted_authserv_id names your "
    "receiving server, whose Authentication-Results must pass DKIM or SPF for a sender's "
    'address: unset, no email is believed. Channels "email:ann@example.com".',
    ("voice",): "Phone calls: the phone provider places them, TTS speaks, STT listens; "
    "public_url is where the provider reaches this machine's webhooks.",
    ("voice", "inbound"): 'Calls to the Twilio number: set the number\'s "A call comes in" '
    'webhook to server.public_url + /webhooks/twilio/voice and its "Call status changes" to '
    "the same + /status (without it a call hung up mid-menu never ends).",
    ("voice", "tts"): "provider (elevenlabs, deepgram, openai or local), then fallback in order; "
    "a provider without a key is skipped and local ends the chain. voice and model are the "
    "provider's own.",
    ("voice", "stt"): "provider and fallback as for tts; grammar limits local recognition.",
    ("voice", "elevenlabs"): "An account's key serves speaking and hearing (likewise deepgram "
    "and openai); a section's own api_key overrides it for its provider.",
    ("logging",): "level: DEBUG, INFO, WARNING or ERROR.",
    ("security",): "deployment_key signs every message and registration; a pane's host types "
    "only what it can verify. Unset: generated into <home>/deployment.key at first start. "
    "Several hosts of one deployment share one (32 characters or more).",
}

_MINIMAL: dict[str, Any] = {
    "//": "Minimal agentcomms configuration: runs on this machine with no accounts (local chat "
    "channel, an embedded Temporal dev server, SQLite in the home). Every key not listed keeps "
    "its default; `agentcomms config init -o FILE` writes them all.",
    "temporal": {"address": "127.0.0.1:7233", "embedded": True},
    "chat": {"local": {"enabled": True}},
    "agents": {
        "//": 'By id, e.g. "backend": {"target": "dev:0.1"} types into tmux pane dev:0.1.',
    },
}


def starter_config(*, minimal: bool = False) -> dict[str, Any]:
    """The file ``config init`` writes: every key with its default, secrets as ``${VAR:-}``."""
    if minimal:
        copy: dict[str, Any] = json.loads(json.dumps(_MINIMAL))
        return copy
    return _annotate(Config().model_dump(mode="json"), ())


def _annotate(section: dict[str, Any], loc: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"//": _COMMENTS[loc]} if loc in _COMMENTS else {}
    for key, value in section.items():
        here = (*loc, key)
        if here in _SECRET_REFERENCES:
            out[key] = f"${{{_SECRET_REFERENCES[here]}:-}}"
        elif isinstance(value, dict) and (value or here in _COMMENTS):
            out[key] = _annotate(value, here)
        else:
            out[key] = value
    return out


@config_app.command()
def init(
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Where to write; default $AGENTCOMMS_HOME/config.json",
            show_default=False,
        ),
    ] = None,
    minimal: Annotated[
        bool, typer.Option("--minimal", help="Only what a local, offline setup needs")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file")] = False,
    slack_manifest: Annotated[
        bool,
        typer.Option(
            "--slack-manifest",
            help="Print the Slack app's manifest instead (paste it at api.slack.com/apps, "
            "Create New App, From a manifest); writes nothing",
        ),
    ] = False,
    public_url: Annotated[
        str | None,
        typer.Option(
            "--public-url",
            help="With --slack-manifest: the gateway's server.public_url, for the Events API "
            "over HTTP (chat.slack.mode http); without it, the app uses Socket Mode",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Write a starter configuration file (0600, in a 0700 directory).

    The full file lists every section with its defaults and a "//" note on
    what it is for. Every secret is an environment reference such as
    "token": "${TELEGRAM_BOT_TOKEN:-}", so the file itself holds none.
    --minimal writes just enough to run locally with no accounts.
    An existing file is kept unless --force is given.

    --slack-manifest prints the Slack app agentcomms needs (its scopes,
    events, interactivity, Socket Mode) as JSON to paste into Slack.

    Examples:

      agentcomms config init

      agentcomms config init --minimal -o ./agentcomms.json

      agentcomms config init --slack-manifest

      agentcomms config init --slack-manifest --public-url https://agents.example.com
    """
    if slack_manifest:
        from agentcomms.transports.slack_manifest import manifest

        if public_url is not None and not public_url.startswith("https://"):
            fail(
                f"--public-url {public_url!r} is not an https:// URL: Slack posts only to "
                "HTTPS (the address in front of the gateway, as in server.public_url)."
            )
        typer.echo(json.dumps(manifest(public_url), indent=2))
        return
    if public_url is not None:
        fail("--public-url goes with --slack-manifest: it is where Slack posts.")
    path = (output or default_config_path()).expanduser()
    text = json.dumps(starter_config(minimal=minimal), indent=2, ensure_ascii=False) + "\n"
    try:
        write_private_file(path, text, overwrite=force)
    except ConfigError as exc:
        _fail(exc)
    flag = "" if output is None else f" -c {path}"
    kind = "minimal" if minimal else "full starter"
    typer.echo(f"Wrote {path} ({kind} configuration, mode 0600).")
    typer.echo("Next steps:")
    typer.echo('  1. Add your agents under "agents" and enable the chat providers you use;')
    typer.echo("     export their secrets (e.g. TELEGRAM_BOT_TOKEN) instead of writing them in.")
    typer.echo(f"  2. agentcomms config validate{flag}")
    typer.echo("  3. agentcomms up")


@config_app.command()
def validate(config: ConfigOption = None) -> None:
    """Check the file, its ${VAR} references and AGENTCOMMS_* overrides.

    Prints "OK: PATH" and a one-line summary, or every problem found (file or
    variable, key, what was expected) and exits 1. Secrets are never printed.

    Example: agentcomms config validate -c ./agentcomms.json
    """
    resolved = _resolve(config)
    for warning in [*env_override_hints(), *_warnings(resolved.config)]:
        typer.echo(f"warning: {warning}", err=True)
    if resolved.file_exists:
        typer.echo(f"OK: {resolved.path}")
    else:
        typer.echo(f"OK: {resolved.path} (no such file: defaults apply; `agentcomms config init`)")
    typer.echo(_summary(resolved))


@config_app.command()
def reload(as_json: JsonOption = False) -> None:
    """Apply the config file to the running gateway, without a restart or a lost message.

    Which chat goes to which agent (chat.channels), who may write (chat.allowed_senders) and the
    configured agents change at once; anything else that changed (a provider's token, the
    socket, Temporal, the database…) is named with the restart it needs, and not applied. A
    file that does not read changes nothing. (SIGHUP stays a stop, as a closed terminal sends
    it; a service manager's reload runs this command.)

    Example: agentcomms config reload
    """
    result = ask_gateway("config_reload")
    if as_json:
        print_json(result)
        return
    applied, waiting = result["applied"], result["needs_restart"]
    if not applied and not waiting:
        console.print("nothing changed: the running gateway already has this config")
    if applied:
        console.print(f"applied: {', '.join(applied)}")
    if waiting:
        console.print(
            f"not applied, needs a restart of `agentcomms up` (or the gateway and workers): "
            f"{', '.join(waiting)}"
        )


@config_app.command()
def show(
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the configuration as JSON")
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Print the effective configuration: file + AGENTCOMMS_* + defaults.

    The table says where each value came from: file, env VARIABLE or default.
    Secrets are shown as "***" (unset ones as null), as is a password in a URL.

    Examples:

      agentcomms config show

      agentcomms config show --json | jq .temporal.address
    """
    resolved = _resolve(config)
    for hint in env_override_hints():
        typer.echo(f"warning: {hint}", err=True)
    data = redacted(resolved.config)
    if json_output:
        print_json(data)
        return
    origin = "" if resolved.file_exists else " (no such file: defaults)"
    from rich.table import Table

    table = Table(title=f"{resolved.path}{origin}", title_justify="left")
    table.add_column("Key", no_wrap=True)
    table.add_column("Value", overflow="fold")
    table.add_column("Source", no_wrap=True)
    for loc, value in _leaves(data, ()):
        table.add_row(
            Text(".".join(loc)), Text(json.dumps(value, ensure_ascii=False)), resolved.source(loc)
        )
    console.print(table)


def _resolve(path: Path | None) -> ResolvedConfig:
    try:
        return resolve_config(path)
    except ConfigError as exc:
        _fail(exc)


def _fail(exc: ConfigError) -> NoReturn:
    # Messages quote user keys and paths: print them literally, not as rich markup.
    fail(escape(str(exc)))


def _leaves(value: Any, loc: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
    if isinstance(value, dict) and value:
        return [leaf for k, v in value.items() for leaf in _leaves(v, (*loc, k))]
    return [(loc, value)]


def _warnings(config: Config) -> list[str]:
    """Providers switched on without the credentials they need: valid, but they cannot connect."""
    warnings = [
        f"chat.{name} is enabled but chat.{name}.{key} is not set, so it cannot connect"
        for name in PROVIDERS
        if config.chat.provider(name).enabled
        for key in config.chat.provider(name).missing_credentials()
    ]
    telegram = config.chat.telegram
    if telegram.enabled and telegram.mode == "webhook":
        if config.server.public_url is None:
            warnings.append(
                "chat.telegram.mode is webhook but server.public_url is not set, so Telegram "
                "cannot reach the gateway"
            )
        if telegram.webhook_secret is None:
            warnings.append(
                "chat.telegram.mode is webhook but chat.telegram.webhook_secret is not set, so "
                "every webhook call would be refused"
            )
    if config.chat.whatsapp.enabled:
        warnings.extend(config.chat.whatsapp.webhook_problems(config.server.public_url))
    slack = config.chat.slack
    if slack.enabled and slack.mode == "http" and config.server.public_url is None:
        warnings.append(
            "chat.slack.mode is http but server.public_url is not set, so Slack cannot reach "
            "the gateway (or use mode socket, which needs no public URL)"
        )
    return warnings + _servers_missing(config)


def _servers_missing(config: Config) -> list[str]:
    from agentcomms.config import host_name
    from agentcomms.config.agents import servers_missing

    return servers_missing(config.agents, host_name())


def _summary(resolved: ResolvedConfig) -> str:
    config = resolved.config
    agents = ", ".join(config.agents) or "none"
    chat = [name for name in PROVIDERS if config.chat.provider(name).enabled]
    temporal = config.temporal.address + (
        " (embedded dev server)" if config.temporal.embedded else ""
    )
    database = (
        "SQLite in the home"
        if config.database.url is None
        else (config.database.url.split(":", 1)[0].split("+", 1)[0])
    )
    overrides = len(resolved.env)
    return (
        f"agents: {agents}; chat: {', '.join(chat) or 'none'}; temporal {temporal}; "
        f"database: {database}; {overrides} environment override{'s' * (overrides != 1)}"
    )
