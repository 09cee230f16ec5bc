"""The gateway socket under bad input: every mistake gets an error reply and nothing dies."""

from __future__ import annotations

import asyncio
import json
import socket
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.errors import GatewayAlreadyRunning
from gateway.socket.protocol import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOT_FOUND,
    NOT_YOURS,
    PARSE_ERROR,
)
from gateway.socket.server import SocketServer
from tests.support.stack import Stack, running_stack


@pytest.fixture
async def stack(temporal_env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[Stack]:
    """The gateway and its socket alone: no worker, since nothing here reaches a pane."""
    async with running_stack(temporal_env.client, tmp_path, with_worker=False) as s:
        yield s


class RawConnection:
    """Bytes in, parsed reply lines out: for sending what a well-behaved client never would."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, path: Path) -> RawConnection:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 20)
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def reply(self) -> dict[str, Any]:
        line = await asyncio.wait_for(self.reader.readline(), 10)
        assert line, "the gateway closed the connection"
        parsed: dict[str, Any] = json.loads(line)
        return parsed

    async def request(self, body: Any) -> dict[str, Any]:
        await self.send(json.dumps(body).encode() + b"\n")
        return await self.reply()

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


@pytest.fixture
async def raw(stack: Stack) -> AsyncIterator[RawConnection]:
    conn = await RawConnection.open(stack.cfg.server.socket())
    yield conn
    await conn.close()


def error_code(reply: dict[str, Any]) -> int:
    assert "error" in reply, reply
    code: int = reply["error"]["code"]
    return code


async def test_socket_is_owner_only(stack: Stack) -> None:
    mode = stat.S_IMODE(stack.cfg.server.socket().stat().st_mode)
    assert mode == 0o600


async def test_ping_and_status(raw: RawConnection) -> None:
    assert await raw.request({"id": 1, "method": "ping"}) == {"id": 1, "result": {"pong": True}}
    status = (await raw.request({"id": "s", "method": "status", "params": {}}))["result"]
    assert status["running"] is True and status["started_at"]
    assert {p["name"] for p in status["providers"]} >= {"local", "telegram", "discord"}


async def test_a_request_acting_for_an_agent_names_a_valid_one(raw: RawConnection) -> None:
    bad = await raw.request({"id": 1, "method": "ping", "caller": "../b; rm"})
    assert error_code(bad) == INVALID_REQUEST and "caller" in bad["error"]["message"]
    assert (await raw.request({"id": 2, "method": "ping", "caller": "a"}))["result"]["pong"]
    # What only the human asks for (the local inbox holds every agent's talk) is refused.
    inbox = await raw.request({"id": 3, "method": "inbox", "caller": "a"})
    assert error_code(inbox) == NOT_YOURS and "not open to agents" in inbox["error"]["message"]


async def test_bad_inputs_get_errors_and_the_connection_lives(raw: RawConnection) -> None:
    await raw.send(b"{not json\n")
    assert error_code(await raw.reply()) == PARSE_ERROR
    assert error_code(await raw.request([1, 2, 3])) == INVALID_REQUEST
    assert error_code(await raw.request({"id": 2})) == INVALID_REQUEST
    unknown = await raw.request({"id": 3, "method": "launch_missiles"})
    assert error_code(unknown) == METHOD_NOT_FOUND and unknown["id"] == 3
    assert "launch_missiles" in unknown["error"]["message"]
    wrong = await raw.request(
        {"id": 4, "method": "events", "params": {"agent_id": "a", "limit": "x"}}
    )
    assert error_code(wrong) == INVALID_PARAMS and "limit" in wrong["error"]["message"]
    too_many = await raw.request(
        {"id": 5, "method": "events", "params": {"agent_id": "a", "limit": 5000}}
    )
    assert error_code(too_many) == INVALID_PARAMS
    extra = await raw.request({"id": 6, "method": "send", "params": {"agent_id": "a", "msg": "hi"}})
    assert error_code(extra) == INVALID_PARAMS and "message" in extra["error"]["message"]
    hostile_id = await raw.request(
        {"id": 7, "method": "send", "params": {"agent_id": "../etc; rm -rf", "message": "hi"}}
    )
    assert error_code(hostile_id) == INVALID_PARAMS
    assert "agent id '../etc; rm -rf' is not valid" in hostile_id["error"]["message"]
    for target, says in (
        ("s:0.0;", "cannot end with ';'"),
        ("s\x1b:0", "not a usable tmux target"),
    ):
        # Refused when registered, not later when every delivery to it would fail.
        bad_target = await raw.request(
            {"id": 11, "method": "register", "params": {"agent_id": "a", "target": target}}
        )
        assert error_code(bad_target) == INVALID_PARAMS and says in bad_target["error"]["message"]
    bad_key = await raw.request(
        {
            "id": 9,
            "method": "register",
            "params": {"agent_id": "a", "target": "s:0.0", "interrupt_key": "C-c ; kill-server"},
        }
    )
    assert error_code(bad_key) == INVALID_PARAMS and "interrupt key" in bad_key["error"]["message"]
    bad_id = await raw.request(
        {
            "id": 10,
            "method": "send",
            "params": {"agent_id": "a", "message": "x", "event_id": "#{x}"},
        }
    )
    assert error_code(bad_id) == INVALID_PARAMS and "event_id" in bad_id["error"]["message"]
    assert await raw.request({"id": 8, "method": "ping"}) == {"id": 8, "result": {"pong": True}}


async def test_a_malformed_request_is_answered_under_its_own_id(raw: RawConnection) -> None:
    # A client matches replies to its requests by id (agentcomms' own waits for its id forever):
    # an error about the rest of a request must still carry that request's id.
    no_method = await raw.request({"id": 21})
    assert error_code(no_method) == INVALID_REQUEST and no_method["id"] == 21
    listed = await raw.request({"id": "p", "method": "send", "params": [1]})
    assert error_code(listed) == INVALID_REQUEST and listed["id"] == "p"
    bad_caller = await raw.request({"id": 22, "method": "ping", "caller": "bad id!"})
    assert error_code(bad_caller) == INVALID_REQUEST and bad_caller["id"] == 22
    # `true` is no id: answered as the unusable id it is, never as request 1.
    boolean = await raw.request({"id": True, "method": "ping"})
    assert error_code(boolean) == INVALID_REQUEST and boolean["id"] is None


async def test_a_message_with_nothing_to_type_is_refused(raw: RawConnection) -> None:
    # Typed, it would be a bare header, submitted: a turn of the agent's spent on nothing.
    for i, text in enumerate(["   ", "\n\t", "\x1b]0;title\x07\x00", "\x1b[31m"]):
        empty = await raw.request(
            {"id": i, "method": "send", "params": {"agent_id": "a", "message": text}}
        )
        assert error_code(empty) == INVALID_PARAMS, (text, empty)
        assert "the message is empty" in empty["error"]["message"]
    peer = await raw.request(
        {
            "id": 9,
            "method": "agent_message",
            "params": {"from_agent_id": "a", "to_agent_id": "b", "message": " "},
        }
    )
    assert error_code(peer) == INVALID_PARAMS and "the message is empty" in peer["error"]["message"]


async def test_json_nested_too_deeply_is_a_parse_error(raw: RawConnection) -> None:
    # Within the line limit, yet deeper than Python's parser goes: the sender's mistake, not
    # the gateway's internal error (which logs a traceback for each).
    deep = b'{"id": 1, "method": "ping", "params": {"a": ' + b"[" * 100_000 + b"]" * 100_000
    await raw.send(deep + b"}}\n")
    nested = await raw.reply()
    assert error_code(nested) == PARSE_ERROR and "nested too deeply" in nested["error"]["message"]
    await raw.send(b'{"id": 2, "method": "ping", "params": {"n": ' + b"9" * 10_000 + b"}}\n")
    assert error_code(await raw.reply()) == PARSE_ERROR
    assert (await raw.request({"id": 3, "method": "ping"}))["result"] == {"pong": True}


async def test_a_ten_megabyte_line_is_refused_without_killing_anything(raw: RawConnection) -> None:
    await raw.send(
        b'{"id": 1, "method": "send", "params": {"message": "' + b"x" * (10 << 20) + b'"}}\n'
    )
    assert error_code(await raw.reply()) == INVALID_REQUEST
    assert (await raw.request({"id": 2, "method": "ping"}))["result"] == {"pong": True}


async def test_unknown_agent_and_event_are_not_found(raw: RawConnection) -> None:
    events = await raw.request({"id": 1, "method": "events", "params": {"agent_id": "nobody"}})
    assert error_code(events) == NOT_FOUND and "nobody" in events["error"]["message"]
    since = await raw.request(
        {"id": 2, "method": "events", "params": {"agent_id": "nobody", "since": "evt_nope"}}
    )
    assert error_code(since) == NOT_FOUND
    interrupt = await raw.request(
        {"id": 3, "method": "interrupt", "params": {"agent_id": "nobody"}}
    )
    assert error_code(interrupt) == NOT_FOUND
    reply = await raw.request(
        {"id": 4, "method": "reply", "params": {"channel_id": "telegram:1", "message": "x"}}
    )
    assert error_code(reply) == NOT_FOUND


async def test_many_clients_at_once(stack: Stack) -> None:
    async def client(n: int) -> list[dict[str, Any]]:
        conn = await RawConnection.open(stack.cfg.server.socket())
        try:
            return [await conn.request({"id": f"{n}-{i}", "method": "ping"}) for i in range(20)]
        finally:
            await conn.close()

    replies = await asyncio.gather(*(client(n) for n in range(25)))
    assert all(r["result"] == {"pong": True} for batch in replies for r in batch)
    assert {r["id"] for batch in replies for r in batch} == {
        f"{n}-{i}" for n in range(25) for i in range(20)
    }


async def test_a_second_gateway_on_the_same_socket_refuses(stack: Stack) -> None:
    second = SocketServer(stack.cfg.server.socket(), stack.gateway.socket_methods.call)
    with pytest.raises(GatewayAlreadyRunning, match="already running"):
        await second.start()
    assert (await stack.call("ping")) == {"pong": True}


async def test_a_stale_socket_file_is_replaced(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    path = tmp_path / "stale.sock"
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(path))
    dead.close()  # the file stays and nobody listens: a crashed gateway's leftover
    async with running_stack(
        temporal_env.client, tmp_path, with_worker=False, socket_path=path
    ) as s:
        assert await s.call("ping") == {"pong": True}
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_a_connection_accepted_as_the_server_closes_is_closed_with_it(
    tmp_path: Path,
) -> None:
    """However far the accepting got when the gateway closed (the loop given 1 to 11 turns),
    the client sees its connection end: none is left open for the garbage collector. (With no
    turn the connection is still in the kernel's queue, never accepted, and the closed socket
    leaves nothing of it in the gateway.)"""

    async def answer(method: str, params: dict[str, Any], caller: object) -> Any:
        return {}

    path = tmp_path / "g.sock"
    for turns in range(1, 12):
        server = SocketServer(path, answer)
        await server.start()
        reader, writer = await asyncio.open_unix_connection(str(path))
        for _ in range(turns):
            await asyncio.sleep(0)
        await server.close()
        try:
            ended = await asyncio.wait_for(reader.read(), 5)
        except ConnectionResetError:
            ended = b""
        finally:
            writer.close()
        assert ended == b"", turns
