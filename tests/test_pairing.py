"""Pairing needs the human: `agentcomms pair CODE` shows who the code admits and asks on the
terminal (`--yes` for scripts); without a terminal and without `--yes` it admits nobody; the
socket's `pair` admits only when confirmed; `senders` never shows a pending code. Real strangers
through python-telegram-bot and Telegram's fake, the real `agentcomms` command (on a real
pseudo-terminal where it asks), a real gateway and Temporal dev server, real SQLite."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.fakes.telegram import FakeTelegram
from tests.support.chat import CHAT, connected, with_telegram
from tests.support.cli import cli, cli_home, cli_on_terminal
from tests.support.stack import Stack, running_stack
from tests.support.waiting import eventually

MALLORY, TRENT = 999, 998
PROMPT = "Admit them?"


@pytest.fixture
async def stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, telegram: FakeTelegram, agent: str
) -> AsyncIterator[Stack]:
    channels = {f"telegram:{chat}": agent for chat in (CHAT, MALLORY, TRENT)}
    configure = with_telegram(telegram, agent, channels=channels)
    async with running_stack(temporal_env.client, tmp_path, configure=configure) as s:
        await connected(s, "telegram")
        yield s


async def pairing_code(telegram: FakeTelegram, stranger: int, name: str) -> str:
    """A stranger writes; the code the bot answers them with."""
    telegram.human_says(stranger, "let me in", first_name=name)
    await eventually(lambda: telegram.texts_to(stranger), timeout=20)
    found = re.search(r"agentcomms pair (\w+)", telegram.texts_to(stranger)[0])
    assert found, telegram.texts_to(stranger)
    return found[1]


async def admitted(stack: Stack, stranger: int) -> bool:
    return await stack.store.sender_admitted("telegram", str(stranger))


async def test_senders_shows_who_waits_never_their_code(
    stack: Stack, telegram: FakeTelegram, tmp_path: Path
) -> None:
    code = await pairing_code(telegram, MALLORY, "Mallory")
    listed = await stack.call("senders")
    assert code not in json.dumps(listed)
    assert listed["pending"] == 1
    [waiting] = [s for s in listed["senders"] if s["state"] == "pending"]
    assert (waiting["sender_id"], waiting["sender_name"]) == (str(MALLORY), "Mallory")
    printed = await cli(cli_home(tmp_path, stack), "senders")
    assert printed.returncode == 0, printed.stderr
    assert "Mallory" in printed.stdout and "1 waiting to pair" in printed.stdout
    assert code not in printed.stdout + printed.stderr
    as_json = await cli(cli_home(tmp_path, stack), "senders", "--json")
    assert code not in as_json.stdout and json.loads(as_json.stdout)["pending"] == 1


async def test_the_socket_admits_only_what_was_confirmed(
    stack: Stack, telegram: FakeTelegram, agent: str
) -> None:
    code = await pairing_code(telegram, MALLORY, "Mallory")
    shown = await stack.call("pair", code=code)
    assert shown["admitted"] is False and shown["sender_name"] == "Mallory"
    assert shown["channel_id"] == f"telegram:{MALLORY}" and shown["agent_id"] == agent
    assert shown["wrote_at"]
    assert not await admitted(stack, MALLORY)
    confirmed = await stack.call("pair", code=code, confirm=True)
    assert confirmed["admitted"] is True and await admitted(stack, MALLORY)


async def test_pair_asks_the_human_and_admits_only_on_yes(
    stack: Stack, telegram: FakeTelegram, tmp_path: Path, agent: str
) -> None:
    home = cli_home(tmp_path, stack)
    code = await pairing_code(telegram, MALLORY, "Mallory")

    # No terminal (an agent's tool, a pipe) and no --yes: refused, nobody admitted.
    piped = await cli(home, "pair", code)
    assert piped.returncode != 0
    assert "not admitted" in piped.stderr and "add --yes" in piped.stderr, piped.stderr
    assert not await admitted(stack, MALLORY)

    # On a terminal: who, from where, when; "n" admits nobody.
    code_no, printed = await cli_on_terminal(home, "pair", code, prompt=PROMPT, answer="n")
    assert code_no != 0 and "not admitted" in printed, printed
    assert "Mallory" in printed and f"telegram:{MALLORY}" in printed and agent in printed
    assert not await admitted(stack, MALLORY)

    # "y" admits.
    code_yes, printed = await cli_on_terminal(home, "pair", code, prompt=PROMPT, answer="y")
    assert code_yes == 0 and "admitted Mallory" in printed, printed
    assert await admitted(stack, MALLORY)

    # A script says --yes, and nothing is asked.
    trents = await pairing_code(telegram, TRENT, "Trent")
    scripted = await cli(home, "pair", trents, "--yes")
    assert scripted.returncode == 0, scripted.stderr
    assert "admitted Trent" in scripted.stdout and PROMPT not in scripted.stderr
    assert await admitted(stack, TRENT)
