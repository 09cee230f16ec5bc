"""IRC against a real server (Debian's ngircd): a human's messages, in a private conversation
and in a channel, typed into the agent with their header; a sender allowed by full mask, so a
stranger who takes the allowed human's nick is nobody; an approval answered by its reply code;
the agent's reply in the channel. Reading IRC lines and who sent them are unit tests; the whole
path runs on one stack (real Temporal, gateway, worker, tmux, SQLite) shared by the module."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config
from agentcomms.errors import ChatProviderUnavailable
from agentcomms.transports.irc import LINE_BYTES, IrcSender, lines_of, parse, sender_of
from gateway.chat.strangers import PAIRING_REPLIES_PER_HOUR, STRANGER_ROWS_PER_SENDER
from tests.support.chat import provider_is
from tests.support.hooks import open_approval
from tests.support.irc import IrcServer, mask, on_irc, running_ircd
from tests.support.stack import Stack, register_recorder, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually

AGENT = f"backend-{uuid.uuid4().hex[:8]}"
STRANGERS, LINES = 12, 7  # more lines each than a stranger's rows
OPS = "#ops"

SENDERS = [
    (":alice!~alice@127.0.0.1 PRIVMSG #ops :hi", "alice!~alice@127.0.0.1"),
    ("@account=alice :alice!~a@host PRIVMSG bot :hi", "account:alice"),
    # Not identified with services: the mask, never the nick.
    ("@account=* :alice!~mallory@evil PRIVMSG bot :hi", "alice!~mallory@evil"),
]


@pytest.mark.parametrize(("raw", "sender"), SENDERS)
def test_a_sender_is_what_the_server_vouches_for(raw: str, sender: str) -> None:
    line = parse(raw)
    assert (line.command, line.params[1], sender_of(line)) == ("PRIVMSG", "hi", sender)


def test_text_goes_as_lines_a_server_takes() -> None:
    lines = lines_of("first\nsecond " + "é" * 400 + "\r\0")
    assert lines[0] == "first"
    assert all(len(line.encode()) <= LINE_BYTES and "\r" not in line for line in lines)
    assert "".join(lines[1:]).replace(" ", "") == "second" + "é" * 400


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IrcServer]:
    """The module's IRC server."""
    with running_ircd(tmp_path_factory.mktemp("ircd")) as running:
        yield running


@pytest.fixture(scope="module")
def ircd(server: IrcServer) -> int:
    """Its plain port."""
    return server.port


@pytest.fixture(scope="module")
async def stack(
    temporal_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory, ircd: int
) -> AsyncIterator[Stack]:
    def configure(cfg: Config) -> Config:
        irc = cfg.chat.irc.model_copy(
            update={
                "enabled": True,
                "host": "127.0.0.1",
                "port": ircd,
                "tls": False,
                "nick": "agentcomms",
                "channels": [OPS],
            }
        )
        chat = cfg.chat.model_copy(
            update={
                "irc": irc,
                "channels": {f"irc:{OPS}": AGENT, "irc:alice": AGENT},
                "allowed_senders": {"irc": [mask("alice", "alice"), mask("Alice", "alice")]},
            }
        )
        return cfg.model_copy(update={"chat": chat})

    tmp = tmp_path_factory.mktemp("irc")
    async with running_stack(temporal_env.client, tmp, configure=configure) as s:
        await eventually(lambda: provider_is(s, "irc", "connected"), timeout=20)
        yield s


async def test_the_allowed_mask_is_typed_and_a_nick_alone_is_nobody(
    stack: Stack, ircd: int, tmux: Tmux, tmp_path: Path
) -> None:
    pane = await register_recorder(stack, tmux, tmp_path, AGENT)
    async with on_irc(ircd, "alice", "alice") as alice:
        alice.says("agentcomms", "hello from IRC")
        await eventually(lambda: pane.read_bytes() == b"[irc:alice from alice] hello from IRC\r")
    # Someone else takes the free nick: same nick, another mask, nobody's.
    async with on_irc(ircd, "alice", "mallory") as mallory:
        mallory.says("agentcomms", "rm -rf ~")
        await eventually(lambda: mallory.told("alice") or None)

        async def refused() -> bool:
            events = await stack.store.events_after(AGENT, None, 50)
            return any(e.status == "rejected" and e.text == "rm -rf ~" for e in events)

        await eventually(refused)
    async with on_irc(ircd, "alice", "alice", OPS) as alice:
        alice.says(OPS.upper(), "status?")  # the same channel, however it is spelt
        typed = b"[irc:alice from alice] hello from IRC\r[irc:#ops from alice] status?\r"
        await eventually(lambda: pane.read_bytes() == typed)
    # Her nick spelt in capitals is the same conversation, as mapped.
    async with on_irc(ircd, "Alice", "alice") as alice:
        alice.says("agentcomms", "it's me")
        await eventually(lambda: pane.read_bytes() == typed + b"[irc:alice from Alice] it's me\r")
    assert b"rm -rf" not in pane.read_bytes()


async def test_an_approval_is_answered_by_its_code_and_the_agent_speaks_in_the_channel(
    stack: Stack, ircd: int
) -> None:
    async with on_irc(ircd, "alice", "alice", OPS) as alice:
        approval = await open_approval(stack, AGENT)
        code = f"Reply YES {approval} or NO {approval}"
        await eventually(lambda: [t for t in alice.told("alice") if code in t] or None)
        alice.says("agentcomms", f"yes {approval}")
        waited = await stack.call("approval_wait", id=approval, wait_s=10)
        assert waited["decision"]["behavior"] == "allow"
        assert (waited["decided_by"], waited["decided_via"]) == ("alice", "irc")
        await eventually(lambda: [t for t in alice.told(OPS) if "allowed by alice on IRC" in t])

        await stack.call(
            "reply", channel_id=f"irc:{OPS}", message="deployed.\nall green", agent_id=AGENT
        )
        await eventually(lambda: alice.told(OPS)[-2:] == ["deployed.", "all green"] or None)


async def test_a_crowd_of_strangers_costs_a_bounded_number_of_rows_and_answers(
    stack: Stack, ircd: int, tmux: Tmux, tmp_path: Path
) -> None:
    pane = await register_recorder(stack, tmux, tmp_path, AGENT)
    before = pane.read_bytes()
    async with on_irc(ircd, "alice", "alice", OPS) as alice, contextlib.AsyncExitStack() as crowd:
        strangers = [
            await crowd.enter_async_context(on_irc(ircd, f"guest{n}", f"guest{n}", OPS))
            for n in range(STRANGERS)
        ]
        for line in range(LINES):
            for stranger in strangers:
                stranger.says(OPS, f"{stranger.nick} says {line}")

        async def recorded() -> int:
            events = await stack.store.events_after(AGENT, None, 1_000)
            return sum(e.status == "rejected" and "guest" in e.text for e in events)

        # Each stranger's first few are kept for the human's audit, and nothing more.
        await eventually(lambda: _is(recorded(), STRANGERS * STRANGER_ROWS_PER_SENDER), timeout=60)
        alice.says(OPS, "still here")
        await eventually(
            lambda: pane.read_bytes() == before + b"[irc:#ops from alice] still here\r", timeout=30
        )
        answers = [
            line for line in alice.heard if line.command == "PRIVMSG" and line.nick == "agentcomms"
        ]
        assert len(answers) <= PAIRING_REPLIES_PER_HOUR
    assert b"guest" not in pane.read_bytes()


async def _is(count: Awaitable[int], wanted: int) -> bool:
    return await count == wanted


def _sender(**irc: object) -> IrcSender:
    """A sender with no receiving connection in its process (a worker on its own)."""
    section = {"enabled": True, "host": "127.0.0.1", "nick": "solo", **irc}
    return IrcSender(Config.model_validate({"chat": {"irc": section}}))


async def test_a_worker_on_its_own_sends_over_tls_checking_the_servers_certificate(
    server: IrcServer,
) -> None:
    async with on_irc(server.port, "bob", "bob", "#builds") as bob:
        tls = {"port": server.tls_port, "tls": True}
        await _sender(cafile=str(server.ca), **tls).send_text("#builds", "build 42 green")
        await eventually(lambda: bob.told("#builds") == ["build 42 green"] or None)
        assert [line.nick for line in bob.heard if line.command == "PRIVMSG"] == ["solo-out"]
        # A certificate nobody the sender trusts signed: nothing is sent.
        with pytest.raises(ChatProviderUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
            await _sender(**tls).send_text("#builds", "not this")
        assert bob.told("#builds") == ["build 42 green"]
