"""The MCP tools in memory (fastmcp's Client) against a real gateway, worker and Temporal dev server.

Effects are read back where they land: the recorder pane's bytes, the projection, the socket.
One stack serves the module, each test with agents of its own; the test that switches a provider
on in the configuration has a stack of its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError
from temporalio.testing import WorkflowEnvironment

import gateway.messages.methods
from mcp_server import build_server
from tests.support.mcp import TOOLS, call
from tests.support.stack import Stack, register_recorder, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually


@pytest.fixture(scope="module")
async def stack(
    temporal_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    async with running_stack(temporal_env.client, tmp_path_factory.mktemp("mcp")) as s:
        yield s


def server_for(stack: Stack, agent: str) -> FastMCP:
    return build_server(stack.cfg.server.socket(), default_agent=agent)


async def error_of(server: FastMCP, tool: str, **args: Any) -> str:
    async with Client(server) as client:
        with pytest.raises(ToolError) as caught:
            await client.call_tool(tool, args)
    return str(caught.value)


async def test_the_tools_existing_setups_call_are_typed_and_described(stack: Stack) -> None:
    async with Client(server_for(stack, "me")) as client:
        tools = {t.name: t for t in await client.list_tools()}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description
        for name, schema in tool.input_schema["properties"].items():
            assert schema.get("description"), f"{tool.name}.{name} has no description"
    check = tools["check_messages"].input_schema["properties"]
    assert check["limit"]["default"] == 10 and check["agent_id"]["default"] is None
    assert tools["get_agent_events"].input_schema["properties"]["limit"]["default"] == 20
    assert tools["list_agents"].input_schema["properties"]["include_offline"]["default"] is False
    assert tools["get_messages"].input_schema["properties"]["limit"]["default"] == 10
    assert set(tools["send_agent_message"].input_schema["required"]) == {"to_agent_id", "message"}
    assert set(tools["send_message"].input_schema["required"]) == {"provider", "chat_id", "message"}


async def test_a_humans_send_shows_up_in_check_messages_exactly_once(stack: Stack) -> None:
    agent = stack.agent_id("backend")
    sent = [
        (await stack.call("send", agent_id=agent, message=f"hello {i}"))["event_id"]
        for i in range(3)
    ]
    server = server_for(stack, agent)
    first = await call(server, "check_messages", limit=2)
    assert [m["id"] for m in first["messages"]] == sent[:2]
    assert first["has_more"] is True and first["last_seen_id"] == sent[1]
    message = first["messages"][0]
    assert message["text"] == "hello 0" and message["type"] == "human_message"
    assert message["channel_id"] == "cli:local" and message["provider"] == "local"
    assert message["chat_id"] == "local" and message["timestamp"]
    # A new server (a restarted MCP process reads the same cursor from the store).
    second = await call(server_for(stack, agent), "check_messages")
    assert [m["id"] for m in second["messages"]] == sent[2:]
    assert second["has_more"] is False and second["agent_id"] == agent
    third = await call(server, "check_messages")
    assert third == {"messages": [], "agent_id": agent, "has_more": False, "last_seen_id": None}


async def test_concurrent_checks_never_return_a_message_twice(stack: Stack) -> None:
    agent = stack.agent_id()
    for i in range(20):
        await stack.call("send", agent_id=agent, message=f"m{i}")
    server = server_for(stack, agent)
    results = await asyncio.gather(*(call(server, "check_messages", limit=3) for _ in range(10)))
    texts = [m["text"] for r in results for m in r["messages"]]
    assert sorted(texts) == sorted(f"m{i}" for i in range(20))


async def test_the_agent_id_argument_reads_another_mailbox(stack: Stack) -> None:
    other = stack.agent_id("other")
    await stack.call("send", agent_id=other, message="for other")
    result = await call(server_for(stack, "me"), "check_messages", agent_id=other)
    assert result["agent_id"] == other and [m["text"] for m in result["messages"]] == ["for other"]


async def test_wait_for_messages_returns_when_a_message_arrives(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The post wakes the wait; the projection's fallback poll is pushed out of reach.
    monkeypatch.setattr(gateway.messages.methods, "WAIT_POLL_S", 60.0)
    agent = stack.agent_id()
    server = server_for(stack, agent)
    waiting = asyncio.create_task(call(server, "wait_for_messages", timeout_s=20))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    sent = await stack.call("send", agent_id=agent, message="your answer")
    result = await asyncio.wait_for(waiting, 10)  # long before its own 20 s
    assert result["timed_out"] is False
    assert [m["id"] for m in result["messages"]] == [sent["event_id"]]
    # It consumed the message like check_messages does.
    assert (await call(server, "check_messages"))["messages"] == []


async def test_wait_for_messages_times_out_empty(stack: Stack) -> None:
    started = time.monotonic()
    result = await call(server_for(stack, stack.agent_id()), "wait_for_messages", timeout_s=0.3)
    assert time.monotonic() - started > 0.25  # it waited (a hang is the test timeout's job)
    assert result["timed_out"] is True and result["messages"] == []


async def test_send_agent_message_is_typed_into_the_targets_pane(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    sender, target = stack.agent_id("alice"), stack.agent_id("bob")
    out = await register_recorder(stack, tmux, tmp_path, target)
    result = await call(
        server_for(stack, sender), "send_agent_message", to_agent_id=target, message="hi bob"
    )
    assert result["delivered"] is True and result["status"] == "delivered"
    assert result["to_agent_id"] == target and result["from_agent_id"] == sender
    await eventually(lambda: out.read_bytes() == f"[from: {sender}] hi bob\r".encode(), timeout=5)
    # The target reads it too, with what it needs to answer.
    inbox = await call(server_for(stack, target), "check_messages")
    [message] = inbox["messages"]
    assert message["id"] == result["event_id"] and message["type"] == "agent_message"
    assert message["provider"] == "agent" and message["chat_id"] == sender
    assert message["from_agent_id"] == sender and message["text"] == "hi bob"


async def test_send_agent_message_to_an_absent_agent_is_queued_not_delivered(stack: Stack) -> None:
    result = await call(
        server_for(stack, "alice"),
        "send_agent_message",
        to_agent_id=stack.agent_id("away"),
        message="later",
    )
    assert result["delivered"] is False and result["status"] == "queued"


async def test_get_messages_local_is_the_callers_own_talk_with_its_human(stack: Stack) -> None:
    mine, other = stack.agent_id("mine"), stack.agent_id("other")
    to_me = await stack.call("send", agent_id=mine, message="for mine")
    await stack.call("send", agent_id=other, message="for other")
    await call(
        server_for(stack, other),
        "send_message",
        provider="local",
        chat_id="local",
        message="other's question",
    )
    history = await call(
        server_for(stack, mine), "get_messages", provider="local", chat_id="local", limit=50
    )
    assert [(m["id"], m["content"]) for m in history["messages"]] == [
        (to_me["event_id"], "for mine")
    ]


async def test_send_message_local_reaches_the_human_and_get_messages_shows_the_talk(
    stack: Stack,
) -> None:
    agent = stack.agent_id("backend")
    server = server_for(stack, agent)
    sent = await call(server, "send_message", provider="local", chat_id="local", message="Ready?")
    assert sent["success"] is True and sent["message_id"].startswith("evt_")
    inbox = await stack.call("inbox")  # what `agentcomms inbox` shows the human
    assert [(m["id"], m["payload"]["text"]) for m in inbox["messages"]][-1] == (
        sent["message_id"],
        "Ready?",
    )
    answer = await stack.call("send", agent_id=agent, message="Yes, go")
    history = await call(server, "get_messages", provider="local", chat_id="local", limit=2)
    assert history["channel_id"] == "cli:local"
    assert [
        (m["id"], m["content"], m["sender_id"], m["direction"]) for m in history["messages"]
    ] == [
        (sent["message_id"], "Ready?", agent, "out"),
        (answer["event_id"], "Yes, go", "human", "in"),
    ]
    assert all(m["timestamp"] for m in history["messages"])
    got = await call(server, "check_messages")
    assert [m["text"] for m in got["messages"]] == ["Yes, go"]
    followup = await call(
        server,
        "send_message",
        provider="local",
        chat_id="local",
        message="On it",
        reply_to=answer["event_id"],
    )
    stored = await stack.store.get_event(followup["message_id"])
    assert stored is not None and stored.payload["reply_to"] == answer["event_id"]


async def test_send_message_to_a_provider_not_enabled_says_so(stack: Stack) -> None:
    error = await error_of(
        server_for(stack, "me"), "send_message", provider="telegram", chat_id=42, message="x"
    )
    assert "telegram:42" in error and "chat.telegram.enabled" in error


async def test_list_channels_reports_real_provider_status(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with running_stack(temporal_env.client, tmp_path) as stack:
        await _channels_say_why_a_provider_is_not_connected(stack)


async def _channels_say_why_a_provider_is_not_connected(stack: Stack) -> None:
    # A provider switched on after the gateway started is not connected, and says why.
    stack.cfg.chat.telegram.enabled = True
    result = await call(server_for(stack, "me"), "list_channels")
    status = {c["provider_name"]: c["status"] for c in result["channels"]}
    assert (status.pop("local"), status.pop("telegram")) == ("connected", "failed")
    # Every other provider, however many there are, is off.
    assert {"discord", "whatsapp", "sms"} <= status.keys()
    assert set(status.values()) == {"disabled"}
    telegram = next(c for c in result["channels"] if c["provider_name"] == "telegram")
    assert "restart" in telegram["error"]


async def test_list_agents_hides_offline_agents_unless_asked(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    online, gone = stack.agent_id("online"), stack.agent_id("gone")
    await register_recorder(stack, tmux, tmp_path, online)
    # A message to an agent that never registered creates it offline, the message waiting.
    await stack.call("send", agent_id=gone, message="waiting for you")
    server = server_for(stack, "me")

    async def listed(include_offline: bool) -> dict[str, Any]:
        result = await call(server, "list_agents", include_offline=include_offline)
        return {a["id"]: a for a in result["agents"]}

    await eventually(lambda: _has(listed(True), gone, "offline"))
    visible = await eventually(lambda: _has(listed(False), online, "online"))
    assert gone not in visible
    agent = visible[online]
    assert agent["type"] == "tmux" and agent["target"] == f"{online}:0.0"
    assert set(agent) >= {"id", "type", "status", "target"}


async def _has(listing: Any, agent: str, status: str) -> dict[str, Any] | None:
    agents = await listing
    return agents if agent in agents and agents[agent]["status"] == status else None


async def test_daemon_status_while_running(stack: Stack) -> None:
    status = await call(server_for(stack, "me"), "daemon_status")
    assert status["running"] is True and status["started_at"] and status["agent_id"] == "me"
    assert isinstance(status["agents"], int)
    assert {p["name"] for p in status["providers"]} >= {"local", "telegram"}


async def test_get_agent_events_pages_forward_after_since_id(stack: Stack) -> None:
    agent = stack.agent_id()
    ids = [
        (await stack.call("send", agent_id=agent, message=f"e{i}"))["event_id"] for i in range(5)
    ]
    server = server_for(stack, agent)
    first = await call(server, "get_agent_events", limit=2)
    assert [e["id"] for e in first["events"]] == ids[:2] and first["agent_id"] == agent
    rest = await call(server, "get_agent_events", since_id=ids[1])
    assert [e["id"] for e in rest["events"]] == ids[2:]
    assert rest["events"][0]["payload"]["text"] == "e2" and rest["events"][0]["timestamp"]
    # Your own events, before anything ever happened to you: none, not an error.
    assert (await call(server_for(stack, stack.agent_id("new")), "get_agent_events"))[
        "events"
    ] == []
    assert "unknown agent" in await error_of(
        server, "get_agent_events", agent_id=stack.agent_id("nobody")
    )
    assert "evt_nope" in await error_of(server, "get_agent_events", since_id="evt_nope")


@pytest.mark.parametrize(
    ("tool", "args", "says"),
    [
        ("check_messages", {"limit": 0}, "limit"),
        ("check_messages", {"limit": 101}, "limit"),
        ("check_messages", {"agent_id": "no spaces"}, "agent_id"),
        ("check_messages", {"surprise": 1}, "surprise"),
        ("wait_for_messages", {"timeout_s": 0}, "timeout_s"),
        ("wait_for_messages", {"timeout_s": 301}, "timeout_s"),
        ("get_agent_events", {"limit": "many"}, "limit"),
        ("get_agent_events", {"since_id": ""}, "since_id"),
        ("list_agents", {"include_offline": "perhaps"}, "include_offline"),
        ("send_agent_message", {"message": "hi"}, "to_agent_id"),
        ("send_agent_message", {"to_agent_id": "../etc", "message": "hi"}, "to_agent_id"),
        ("send_agent_message", {"to_agent_id": "bob", "message": ""}, "message"),
        ("send_agent_message", {"to_agent_id": "bob", "message": " \n "}, "message"),
        ("send_agent_message", {"to_agent_id": "bob", "message": "x" * 100_001}, "message"),
        ("send_message", {"provider": "pigeon", "chat_id": "1", "message": "x"}, "provider"),
        ("send_message", {"provider": "local", "chat_id": "elsewhere", "message": "x"}, "chat_id"),
        ("send_message", {"provider": "telegram", "chat_id": "a b", "message": "x"}, "chat_id"),
        ("send_message", {"provider": "local", "chat_id": "local"}, "message"),
        (
            "send_message",
            {"provider": "local", "chat_id": "local", "message": "x", "reply_to": ""},
            "reply_to",
        ),
        ("get_messages", {"provider": "local", "chat_id": "local", "limit": 1000}, "limit"),
        ("get_messages", {"chat_id": "local"}, "provider"),
    ],
)
async def test_bad_arguments_are_tool_errors_naming_the_argument(
    stack: Stack, tool: str, args: dict[str, Any], says: str
) -> None:
    assert says in await error_of(server_for(stack, "me"), tool, **args)


async def test_with_the_gateway_down_tools_say_how_to_start_it(tmp_path: Path) -> None:
    socket = tmp_path / "nobody-home.sock"
    server = build_server(socket, default_agent="me")
    status = await call(server, "daemon_status")
    assert status["running"] is False and status["socket"] == str(socket)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("check_messages", {}),
        ("wait_for_messages", {"timeout_s": 1}),
        ("get_agent_events", {}),
        ("list_agents", {}),
        ("send_agent_message", {"to_agent_id": "bob", "message": "hi"}),
        ("send_message", {"provider": "local", "chat_id": "local", "message": "hi"}),
        ("list_channels", {}),
        ("get_messages", {"provider": "local", "chat_id": "local"}),
        ("initiate_call", {"message": "hi"}),
        ("continue_call", {"call_id": "c_" + "0" * 26, "message": "hi"}),
        ("speak_to_user", {"call_id": "c_" + "0" * 26, "message": "hi"}),
        ("end_call", {"call_id": "c_" + "0" * 26}),
        ("list_active_calls", {}),
    ]
    assert {name for name, _ in calls} | {"daemon_status"} == TOOLS
    for tool, args in calls:
        error = await error_of(server, tool, **args)
        assert "agentcomms up" in error and str(socket) in error, (tool, error)


async def test_one_connection_serves_the_tools_and_a_restarted_gateway_is_found_again(
    tmp_path: Path,
) -> None:
    """The MCP server keeps one connection to the gateway socket for its tool calls (one each
    cost a call more than the gateway's answer), each call acting for its own caller; a gateway
    gone says so, and one started again is found by the next call."""
    from agentcomms.errors.mcp import GatewayDown
    from gateway.socket.caller import Caller
    from gateway.socket.server import SocketServer
    from mcp_server.link import GatewayLink

    socket = tmp_path / "g.sock"
    peers: list[object] = []

    async def answer(method: str, params: dict[str, Any], caller: Caller) -> Any:
        peers.append(caller.peer)  # one Peer per connection, read as it was opened
        return {"method": method, "caller": caller.agent}

    link = GatewayLink(socket)
    server = SocketServer(socket, answer)
    await server.start()
    try:
        first, second = await asyncio.gather(link.call("ping"), link.call("whoami"))
        assert (first, second) == (
            {"method": "ping", "caller": None},
            {"method": "whoami", "caller": None},
        )
        await link.call("ping")
        assert len({id(p) for p in peers}) == 1  # three calls, one connection
        await server.close()
        with pytest.raises(GatewayDown, match="not running"):
            await link.call("ping")
        server = SocketServer(socket, answer)
        await server.start()
        assert await link.call("ping") == {"method": "ping", "caller": None}
        assert len({id(p) for p in peers}) == 2
    finally:
        await link.close()
        await server.close()
