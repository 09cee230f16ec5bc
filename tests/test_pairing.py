"""Pairing needs the human: `agentcomms pair CODE` shows who the code admits and asks on the
terminal (`--yes` for scripts); without a terminal and without `--yes` it admits nobody; the
socket's `pair` admits only when confirmed; `senders` never shows a pending code. Once admitted,
the sender is told on their chat, and what they wrote while waiting is typed then, once. Real strangers
through python-telegram-bot and Telegram's fake, the real `agentcomms` command (on a real
pseudo-terminal where it asks), a real gateway and Temporal dev server, real SQLite."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.errors import GatewayError
from gateway.chat.admission import admitted_text
from tests.fakes.telegram import FakeTelegram
from tests.support.chat import CHAT, connected, with_telegram
from tests.support.cli import cli, cli_home, cli_on_terminal
from tests.support.stack import Stack, recording_pane, running_stack
from tests.support.tmux import Tmux
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


async def test_a_paired_sender_is_told_and_what_they_wrote_while_waiting_is_typed_once(
    stack: Stack, telegram: FakeTelegram, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    out = await recording_pane(stack, agent, tmux, tmp_path)
    code = await pairing_code(telegram, MALLORY, "Mallory")  # "let me in"
    telegram.human_says(MALLORY, "deploy staging, please", first_name="Mallory")
    await eventually(lambda: _refused(stack, agent, 2))
    assert out.read_bytes() == b""

    paired = await stack.call("pair", code=code, confirm=True)
    assert (paired["admitted"], paired["told"], paired["passed_on"]) == (True, True, 2)
    held = b"[telegram:999 from Mallory] let me in\r[telegram:999 from Mallory] deploy staging, please\r"
    await eventually(lambda: out.read_bytes() == held, timeout=20)
    await eventually(lambda: len(telegram.texts_to(MALLORY)) == 2, timeout=20)
    told = telegram.texts_to(MALLORY)[1]
    assert told == admitted_text(agent, 2, 2)
    assert f"reach {agent}" in told and "The 2 messages you sent while you waited" in told

    # The same code again admits nobody and passes nothing on a second time.
    with pytest.raises(GatewayError, match="no pairing code"):
        await stack.call("pair", code=code, confirm=True)
    telegram.human_says(MALLORY, "thanks", first_name="Mallory")
    await eventually(lambda: out.read_bytes().endswith(b"thanks\r"), timeout=20)
    assert out.read_bytes() == held + b"[telegram:999 from Mallory] thanks\r"
    assert len(telegram.texts_to(MALLORY)) == 2


async def _refused(stack: Stack, agent: str, count: int) -> bool:
    events = await stack.store.latest_events(agent, 10)
    return sum(e.status == "rejected" for e in events) == count


@pytest.mark.parametrize(
    ("mapped", "passed_on", "held", "cut", "says"),
    [
        ("backend", 0, 0, False, ["now reach backend."]),
        ("backend", 1, 1, False, ["The message you sent while you waited reached it now."]),
        ("backend", 3, 3, True, ["The 3 messages", "longer than 500 characters was cut"]),
        ("backend", 1, 3, False, ["2 sent while you waited did not", "send them again"]),
        (None, 0, 2, False, ["not connected to an agent", "chat.channels"]),
    ],
)
def test_what_an_admitted_sender_is_told(
    mapped: str | None, passed_on: int, held: int, cut: bool, says: list[str]
) -> None:
    told = admitted_text(mapped, passed_on, held, cut=cut)
    assert [s for s in says if s not in told] == [], told
