"""The quick commands answer without typer, exactly as the typer commands would, and need nothing
from the config but the gateway's socket: not the chat providers' secrets, not the deployment key.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.core
from typer.testing import CliRunner

from agentcomms.cli import app, quick
from tests.support.cli import AGENTCOMMS, as_in_a_terminal, cli, cli_home, env_for
from tests.support.home import write_config
from tests.support.mcp import stdio_session, tool
from tests.support.stack import Stack
from tests.support.tmux import Tmux, as_sent, recorder
from tests.support.waiting import typed

# Argument lists the quick path parses itself: it must read them as typer does.
PARSED = [
    ["send", "backend", "hello"],
    ["send", "backend"],
    ["send", "backend", "hi", "--wait", "--timeout", "2.5", "--json"],
    ["send", "--json", "backend", "--timeout=0.1", "--", "-rf; C-c Enter"],
    ["send", "backend", "x", "--event-id", "evt_01J0000000000000000000000", "--event-id", "evt_2"],
    ["interrupt", "backend", "-r", "wrong branch", "--wait"],
    ["interrupt", "backend", "--reason=-x", "--timeout", "300"],
    ["events", "backend", "-n", "5", "--since", "evt_1", "-f", "--json"],
    ["events", "backend", "-n5", "--limit", "1000"],
    ["reply", "cli:local", "done", "-a", "backend"],
    ["reply", "cli:local", "--agent", "backend", "--json"],
    ["channels", "--json"],
    ["channels"],
    ["agents"],
    ["agents", "-a", "--json"],
    ["inbox", "--limit", "3", "--follow"],
    ["status", "--json"],
    ["status"],
    ["send", "backend", "-"],
]
# Mistakes it leaves to typer, which gives the usage error.
MISTAKES = [
    ["send"],
    ["send", "backend", "hi", "extra"],
    ["send", "backend", "--timeout", "301"],
    ["send", "backend", "--timeout", "soon"],
    ["send", "backend", "--timeout"],
    ["send", "backend", "--wait=yes"],
    ["send", "backend", "-x"],
    ["events", "backend", "-n", "0"],
    ["status", "--verbose"],
]
# And what is not a quick command's plain form: help, short options run together, subcommands,
# the other commands.
NOT_QUICK = [
    ["events", "backend", "-fn", "3"],
    ["send", "--help"],
    ["agents", "--help"],
    ["agents", "register", "backend", "--tmux", "dev:0.1"],
    ["up"],
    ["doctor"],
    [],
]


def _typer_params(args: list[str]) -> dict[str, Any]:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    command = group.commands[args[0]]
    with command.make_context(args[0], list(args[1:])) as ctx:
        return dict(ctx.params)


@pytest.mark.parametrize("args", PARSED, ids=" ".join)
def test_the_quick_path_reads_arguments_as_typer_does(args: list[str]) -> None:
    command = quick.COMMANDS[args[0]]
    assert quick.parse(command, args[1:]) == _typer_params(args)


@pytest.mark.parametrize("args", MISTAKES, ids=" ".join)
def test_the_quick_path_leaves_mistakes_to_typer(args: list[str], home: Path) -> None:
    assert quick.parse(quick.COMMANDS[args[0]], args[1:]) is None
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 2, refused.output  # typer's usage error


@pytest.mark.parametrize("args", NOT_QUICK, ids=" ".join)
def test_help_subcommands_and_other_commands_go_to_typer(args: list[str]) -> None:
    assert quick.run(args) is None


def test_a_mistake_gets_typers_usage_error() -> None:
    done = subprocess.run(
        [AGENTCOMMS, "send", "backend", "--timeout", "301"], capture_output=True, text=True
    )
    assert done.returncode == 2 and "Usage: agentcomms send" in done.stderr
    assert "--timeout" in done.stderr


def _home_with_unset_secrets(tmp_path: Path, stack: Stack) -> Path:
    """A config as the gateway's host has it: provider credentials and the deployment key are
    `${VAR}` references to variables that are not set where the agents run."""
    home = tmp_path / "agent-home"
    write_config(
        home,
        {
            "server": {"socket_path": str(stack.cfg.server.socket())},
            "chat": {"telegram": {"enabled": True, "token": "${ACC_UNSET_TELEGRAM_TOKEN}"}},
            "security": {"deployment_key": "${ACC_UNSET_DEPLOYMENT_KEY}"},
        },
    )
    assert "ACC_UNSET_TELEGRAM_TOKEN" not in os.environ
    return home


async def test_agents_need_no_provider_secret(stack: Stack, tmux: Tmux, tmp_path: Path) -> None:
    home = _home_with_unset_secrets(tmp_path, stack)
    agent = stack.agent_id("nosecrets")
    target, out = recorder(tmux, tmp_path, "rec")
    await stack.call(
        "register", agent_id=agent, target=target, socket=tmux.socket, submit_delay_ms=0
    )

    sent = await cli(home, "send", agent, "no secrets here", "--wait", "--json")
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["delivered"] is True
    await typed(out, as_sent("no secrets here"))

    status = await cli(home, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["gateway"]["running"] is True
    listed = await cli(home, "agents", "--json")
    assert agent in [a["id"] for a in json.loads(listed.stdout)["agents"]], listed.stderr

    async with stdio_session(home, tmp_path / "mcp.log", agent=agent) as session:
        answer = await tool(session, "send_agent_message", to_agent_id=agent, message="from mcp")
    assert answer["to_agent_id"] == agent
    await typed(out, as_sent("no secrets here") + f"[from: {agent}] from mcp\r".encode())


@pytest.mark.parametrize("command", ["gateway", "up"])
async def test_the_gateway_still_refuses_an_unset_secret(
    stack: Stack, tmp_path: Path, command: str
) -> None:
    home = _home_with_unset_secrets(tmp_path, stack)
    refused = await cli(home, command)
    assert refused.returncode == 1, refused.stdout
    assert "chat.telegram.token: environment variable ACC_UNSET_TELEGRAM_TOKEN is not set" in (
        refused.stderr
    )
    assert "security.deployment_key: environment variable ACC_UNSET_DEPLOYMENT_KEY" in (
        refused.stderr
    )
    assert "Traceback" not in refused.stderr


async def test_ctrl_c_ends_events_follow_quietly(stack: Stack, tmp_path: Path) -> None:
    home = cli_home(tmp_path, stack)
    agent = stack.agent_id("follow")
    await stack.call("send", agent_id=agent, message="first")
    proc = await asyncio.create_subprocess_exec(
        AGENTCOMMS, "events", agent, "--follow",
        env=env_for(home, COLUMNS="200"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=as_in_a_terminal,
    )  # fmt: skip
    assert proc.stdout is not None
    first = await asyncio.wait_for(proc.stdout.readline(), 30)
    assert b"human_message" in first and b"first" in first
    proc.send_signal(signal.SIGINT)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 130, err  # what typer answers to Ctrl-C
    assert b"Traceback" not in err
