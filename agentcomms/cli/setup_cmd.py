"""``agentcomms setup [PROVIDER]``: a chat provider set up in one guided run, before any gateway.

The steps are every provider's; what a provider does for each is its row and module in
:mod:`agentcomms.setup`. Every answer has a flag, so a script runs it with no terminal.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import SecretStr

from agentcomms.cli import app
from agentcomms.cli.common import fail
from agentcomms.config import Config, default_config_path, load_config
from agentcomms.config.editing import edit_config, raw_value, referenced_variable, section
from agentcomms.errors import ConfigError, SetupFailed
from agentcomms.ids import check_agent_id
from agentcomms.setup import PROVIDERS, Provider
from agentcomms.transports import InboundMessage
from agentcomms.visible import visible

DEFAULT_WAIT_S = 300.0


def _ask(question: str, *, hidden: bool = False, default: str | None = None) -> str:
    """One answer from the terminal, or the next line of stdin when there is no terminal (a
    script, a test). A hidden answer is never echoed."""
    if sys.stdin.isatty():
        answer: str = typer.prompt(question, hide_input=hidden, default=default)
        return answer.strip()
    suffix = f" [{default}]" if default else ""
    typer.echo(f"{question}{suffix}: ", nl=False)
    line = sys.stdin.readline()
    if not line:
        fail(f"no answer to {question!r} on stdin: give it, or use the flag for it (see --help)")
    typer.echo("" if hidden else line.strip())
    return line.strip() or default or ""


def _confirm(question: str) -> bool:
    if sys.stdin.isatty():
        return typer.confirm(question, default=False)
    return _ask(f"{question} [y/N]").lower() in ("y", "yes")


@app.command()
def setup(
    provider: Annotated[
        str | None,
        typer.Argument(
            help=f"The chat to set up: {', '.join(PROVIDERS)}; asked when left out",
            show_default=False,
        ),
    ] = None,
    token_env: Annotated[
        str | None,
        typer.Option(
            "--token-env",
            metavar="VAR",
            help="Read the bot token from this environment variable; the config then says "
            '"${VAR}" and holds no token (export VAR wherever `agentcomms up` runs)',
            show_default=False,
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            metavar="ID",
            help="The agent the chat reaches (its id); asked when left out",
            show_default=False,
        ),
    ] = None,
    yes: Annotated[
        bool,
        typer.Option("--yes", "-y", help="Admit the first person who writes, without asking"),
    ] = False,
    wait: Annotated[
        float,
        typer.Option(
            "--wait",
            metavar="SECONDS",
            min=1,
            help="Seconds to wait for each message of the human's (theirs first, then their reply)",
        ),
    ] = DEFAULT_WAIT_S,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            metavar="URL",
            help="The provider's API root, for a Bot API server of your own or a proxy (written "
            "as chat.PROVIDER.base_url); default: the config's, else the provider's own",
            show_default=False,
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="Configuration file to change; default $AGENTCOMMS_HOME/config.json",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Set up a chat with your phone: token, config, who may write, and a test both ways.

    Step by step: takes the bot's token (from --token-env VAR, from the variable
    the config already names, or typed, never shown) and checks it with the
    provider; writes chat.PROVIDER to the config (0600); asks you to write to
    the bot and shows who wrote, admitting them (chat.allowed_senders) and
    mapping their chat to the agent you name (chat.channels) only once you
    confirm; then sends a test message to that chat and waits for your reply.
    Run it while `agentcomms up` is stopped (Telegram gives a bot's messages to
    one reader), then start `up`.

    Examples:

      agentcomms setup

      agentcomms setup telegram --agent backend

      TELEGRAM_BOT_TOKEN=... agentcomms setup telegram --token-env TELEGRAM_BOT_TOKEN --agent backend --yes
    """
    row = _provider(provider)
    path = (config or default_config_path()).expanduser()
    current = _guard(lambda: load_config(config))
    _no_gateway_running(current.server.socket(), row)
    if agent is not None:  # a mistyped --agent is told before anything is asked or written
        _agent(current, agent)
    token, variable = _token(row, path, token_env)
    try:
        asyncio.run(_guided(row, path, current, token, variable, agent, yes, wait, base_url))
    except (SetupFailed, ConfigError) as exc:
        # A provider's or a library's words may quote the URL, and a Bot API URL holds the token.
        fail(str(exc).replace(token, "***"))


def _provider(name: str | None) -> Provider:
    known = ", ".join(PROVIDERS)
    if name is None:
        name = _ask(f"Which chat do you want to set up ({known})?").lower()
    row = PROVIDERS.get(name)
    if row is None:
        fail(
            f"{name!r} cannot be set up by `agentcomms setup` yet; it knows {known} (the "
            "others are set up by hand: docs/surfaces/chat.md)"
        )
    return row


def _no_gateway_running(socket: Path, row: Provider) -> None:
    """Setup reads the bot's messages itself: a running gateway would take them first
    (Telegram gives them to one reader) or answer the human with a pairing code."""
    import socket as sockets

    with sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM) as probe:
        try:
            probe.connect(str(socket))
        except OSError:
            return  # nothing listens there (a socket file left behind by a crash included)
    fail(
        f"A gateway is running here (it answers at {socket}): stop `agentcomms up` (or "
        f"`agentcomms gateway`) first, since it reads the bot's messages too; then run "
        f"`agentcomms setup {row.name}` again, and start it once setup is done"
    )


def _guard(load: Callable[[], Config]) -> Config:
    try:
        return load()
    except ConfigError as exc:
        fail(f"{exc}\nsetup changes a configuration that loads: fix what is named above first")


def _token(row: Provider, path: Path, token_env: str | None) -> tuple[str, str | None]:
    """The token, and the variable the config should name for it (None: written in the file)."""
    try:
        written = raw_value(path, "chat", row.name, "token")
    except ConfigError as exc:
        fail(str(exc))
    named = referenced_variable(written)
    if token_env is not None:
        token = os.environ.get(token_env, "").strip()
        if not token:
            fail(
                f"{token_env} is not set (or empty): export it with the bot's token, or leave out "
                "--token-env to type the token"
            )
        return token, token_env
    if named and os.environ.get(named, "").strip():
        typer.echo(f"Using the {row.title} token in ${named}.")
        return os.environ[named].strip(), named
    if isinstance(written, str) and written.strip() and named is None and "${" not in written:
        typer.echo(f"Using the {row.title} token already in {path}.")
        return written.strip(), None
    typer.echo(row.where_the_token_is)
    token = _ask(f"{row.title} bot token (not shown)", hidden=True)
    if not token:
        fail(f"no token given: paste the {row.title} bot's token, or use --token-env VAR")
    return token, None


async def _guided(
    row: Provider,
    path: Path,
    current: Config,
    token: str,
    variable: str | None,
    agent: str | None,
    yes: bool,
    wait: float,
    base_url: str | None,
) -> None:
    session = row.open_session(_with_token(current, row.name, token, base_url))
    try:
        bot = await session.check()
        typer.echo(f"✓ The token belongs to {row.title} bot {bot.name}.")
        _write_provider(row, path, token, variable, base_url)
        agent_id = _agent(current, agent)
        await session.listen()
        typer.echo(f"Now write to {bot.name}: {bot.how_to_write}.")
        typer.echo(f"Waiting up to {wait:.0f} s for a message…")
        messages = session.messages()
        human = await _admitted(row, path, messages, agent_id, yes, wait)
        text = (
            f"agentcomms: this chat now reaches agent {agent_id}. Reply here to finish the setup."
        )
        await session.send(human.chat_id, text)
        typer.echo(f"✓ Sent a test message to {human.channel_id}. Reply to it there.")
        typer.echo(f"Waiting up to {wait:.0f} s for the reply…")
        reply = await _next(messages, wait, lambda m: _same_person(m, human))
        if reply is None:
            _no_reply(row, wait)
        typer.echo(f"✓ Reply seen from {visible(reply.sender_name)}: {visible(reply.text)!r}")
        typer.echo(
            f"Done: {row.title} is set up. Start `agentcomms up`: messages in "
            f"{human.channel_id} then reach {agent_id}."
        )
    finally:
        await session.close()


def _with_token(current: Config, name: str, token: str, base_url: str | None) -> Config:
    update: dict[str, Any] = {"enabled": True, "token": SecretStr(token)}
    if base_url:
        update["base_url"] = base_url
    chat = current.chat.model_copy(
        update={name: current.chat.provider(name).model_copy(update=update)}
    )
    return current.model_copy(update={"chat": chat})


def _write_provider(
    row: Provider, path: Path, token: str, variable: str | None, base_url: str | None
) -> None:
    def change(data: dict[str, Any]) -> None:
        provider = section(data, "chat", row.name)
        provider["enabled"] = True
        provider["token"] = f"${{{variable}}}" if variable else token
        if base_url:
            provider["base_url"] = base_url

    edit_config(path, change, new_file=_new_file)
    where = f"${{{variable}}} (the token stays in the environment)" if variable else "its token"
    typer.echo(f"✓ Wrote chat.{row.name} to {path} (mode 0600), with {where}.")
    if variable is None:
        typer.echo(
            f"  The token is kept in that file, readable by you alone; to keep it in the "
            f"environment instead, export {row.token_variable} and run setup with "
            f"--token-env {row.token_variable}."
        )


def _new_file() -> dict[str, Any]:
    from agentcomms.cli.config_cmd import starter_config

    return starter_config(minimal=True)


def _agent(current: Config, agent: str | None) -> str:
    if agent is None:
        known = list(current.agents)
        default = known[0] if len(known) == 1 else None
        hint = f" (configured: {', '.join(known)})" if known else ""
        agent = _ask(f"Which agent should this chat reach? Its id{hint}", default=default)
    try:
        return check_agent_id(agent)
    except ValueError as exc:
        fail(f"--agent: {exc}")


async def _admitted(
    row: Provider,
    path: Path,
    messages: AsyncIterator[InboundMessage],
    agent: str,
    yes: bool,
    wait: float,
) -> InboundMessage:
    """The first person who writes and whom the human at the terminal admits; they are then in
    chat.allowed_senders and their chat in chat.channels."""
    while True:
        found = await _next(messages, wait, lambda m: True)
        if found is None:
            _no_message(row, wait)
        who = f"{visible(found.sender_name)} (sender {found.sender_id})"
        typer.echo(f"{who} wrote in {_where(found)}: {visible(found.text)!r}")
        question = f"Admit {who} and map {found.channel_id} to agent {agent}?"
        if yes or await asyncio.to_thread(_confirm, question):
            break
        typer.echo("Not admitted. Waiting for another message…")

    def change(data: dict[str, Any]) -> None:
        senders = section(data, "chat", "allowed_senders")
        allowed = senders.get(row.name)
        if not isinstance(allowed, list):
            allowed = senders[row.name] = []
        if found.sender_id not in allowed:
            allowed.append(found.sender_id)
        section(data, "chat", "channels")[found.channel_id] = agent

    edit_config(path, change, new_file=_new_file)
    typer.echo(
        f"✓ Admitted {row.name}:{found.sender_id} (chat.allowed_senders) and mapped "
        f"{found.channel_id} to {agent} (chat.channels)."
    )
    return found


async def _next(
    messages: AsyncIterator[InboundMessage],
    wait: float,
    wanted: Callable[[InboundMessage], bool],
) -> InboundMessage | None:
    """The next message ``wanted`` takes within ``wait`` seconds; None when none came."""
    try:
        async with asyncio.timeout(wait):
            async for message in messages:
                if wanted(message):
                    return message
    except TimeoutError:
        return None
    return None


def _same_person(message: InboundMessage, human: InboundMessage) -> bool:
    return message.chat_id == human.chat_id and message.sender_id == human.sender_id


def _where(message: InboundMessage) -> str:
    kinds = {"private": "a private chat", "dm": "a direct message"}
    kind = kinds.get(message.chat_type or "", message.chat_type or "a chat")
    return f"{message.channel_id} ({kind})"


def _no_message(row: Provider, wait: float) -> NoReturn:
    raise SetupFailed(
        f"No message reached the bot within {wait:.0f} s. Check that you wrote to the bot itself "
        f"(and, for a group, that the bot is in it), then run `agentcomms setup {row.name}` again "
        "(the token is saved; --wait 600 waits longer)."
    )


def _no_reply(row: Provider, wait: float) -> NoReturn:
    raise SetupFailed(
        f"The test message was sent, but no reply came within {wait:.0f} s. The chat is admitted "
        f"and mapped already; run `agentcomms setup {row.name}` again to test both ways, or "
        "start `agentcomms up` and write to the bot."
    )
