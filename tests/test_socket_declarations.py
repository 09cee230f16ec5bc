"""Every socket method is declared once, beside its code, and the confinement admits each request
as the declaration says: read from the real rooms' classes, checked against a real SQLite
projection, at the lowest level that proves each rule."""

from __future__ import annotations

import os
import typing
from typing import Any

import pytest

from agentcomms.config import Config
from agentcomms.errors import RpcError
from agentcomms.ids import new_event_id
from agentcomms.models import Event
from agentcomms.store import Store
from gateway.messages.methods import Methods
from gateway.service import SOCKET_ROOMS
from gateway.socket.caller import Caller, Peer
from gateway.socket.confine import Confinement
from gateway.socket.declare import (
    Anyone,
    ForItself,
    Human,
    Method,
    declare,
    declared,
    declared_in,
)
from gateway.socket.panes import AgentPanes
from gateway.socket.params import CheckMessagesParams, EventsParams, NoParams
from gateway.socket.protocol import METHOD_NOT_FOUND, NOT_YOURS
from gateway.socket.table import MethodTable
from mcp_server.link import GatewayLink

ROOMS = SOCKET_ROOMS
SEED = {"ping", "status", "agents", "send", "interrupt", "events", "reply", "channels"}
SEED |= {"agent_message"}


def _declared() -> dict[str, Method]:
    return {m.name: m for room in ROOMS for m in declared_in(room)}


def test_every_method_is_declared_once_and_no_room_keeps_a_table() -> None:
    names = [m.name for room in ROOMS for m in declared_in(room)]
    assert len(names) == len(set(names)), "a method declared twice"
    assert SEED <= set(names)
    for room in ROOMS:
        assert not hasattr(room, "methods"), f"{room.__name__} keeps a table of its own"
    assert not hasattr(Methods, "extend") and not hasattr(Methods, "dispatch")


# What decides for the human: refused also to a process in an agent's pane.
DECIDES = {
    "approval_decide",
    "config_reload",  # could let a new sender in
    "pair",
    "senders",
    "revoke_sender",
    "phone_dial",
    "phone_dial_answer",
    "phone_dial_hang_up",
    "phone_event",
    "phone_wait",
}


def test_what_decides_for_the_human_says_so() -> None:
    declared = _declared()
    decides = {n for n, m in declared.items() if isinstance(m.who, Human) and m.who.decides}
    assert decides == DECIDES
    open_to_all = {n for n, m in declared.items() if isinstance(m.who, Anyone)}
    assert open_to_all == {"ping", "status", "agents", "channels"}


def test_the_mcp_server_reads_each_result_as_its_method_declares_it() -> None:
    declared = _declared()
    read = 0
    for overload in typing.get_overloads(GatewayLink.call):
        hints = typing.get_type_hints(overload)
        (name,) = typing.get_args(hints["method"]) or (None,)
        if name is None:  # the catch-all: results no tool reads by key
            continue
        assert hints["return"] is declared[name].result, name
        read += 1
    assert read >= 8


class _Misnamed:
    @declare(ForItself("agent"))
    async def mine(self, p: CheckMessagesParams) -> dict[str, Any]:
        return {}


class _Room:
    @declare(Anyone())
    async def seen(self, _: NoParams) -> dict[str, Any]:
        return {"seen": True}

    async def hidden(self, _: NoParams) -> dict[str, Any]:
        return {"hidden": True}


class _Untyped:
    @declare(Anyone())
    async def loose(self, p: dict[str, Any]) -> dict[str, Any]:
        return p


@pytest.fixture
def rules(sqlite_store: Store) -> Confinement:
    cfg = Config.model_validate({"chat": {"channels": {"telegram:5": "a", "telegram:6": "b"}}})
    return Confinement(cfg, sqlite_store, AgentPanes(sqlite_store, "this-host"))


async def test_a_method_without_a_declaration_cannot_be_served(rules: Confinement) -> None:
    table = MethodTable(rules, "127.0.0.1:7233", _Room())
    assert await table.call("seen", {}, Caller()) == {"seen": True}
    with pytest.raises(RpcError) as caught:
        await table.call("hidden", {}, Caller())
    assert caught.value.code == METHOD_NOT_FOUND and "known: seen" in caught.value.message
    with pytest.raises(
        TypeError, match=r"first parameter typed with a gateway\.socket\.params model"
    ):
        declared(_Untyped())
    with pytest.raises(TypeError, match=r"ForItself\('agent'\) names no field"):
        declared(_Misnamed())


# (method, params, the agent the request acts for, what the refusal says; None: admitted)
ADMISSIONS: list[tuple[str, dict[str, Any], str | None, str | None]] = [
    ("ping", {}, "a", None),
    ("status", {}, "a", None),
    ("inbox", {}, "a", "inbox is not open to agents"),
    ("inbox", {}, None, None),
    ("send", {"agent_id": "a", "message": "hi"}, "a", "not open to agents"),
    ("approval_decide", {"id": "ABCD", "behavior": "allow"}, "a", "not open to agents"),
    ("approvals", {}, "a", "not open to agents"),
    ("pair", {"code": "ABCD12"}, "a", "not open to agents"),
    ("phone_dial", {}, "a", "not open to agents"),
    ("agent_hook", {"kind": "codex", "event": "Stop", "at_ns": 1}, "a", "not open to agents"),
    ("approval_open", {"kind": "codex", "tool_name": "Bash"}, "a", "not open to agents"),
    ("check_messages", {"agent_id": "a"}, "a", None),
    ("check_messages", {"agent_id": "b"}, "a", "agent_id: 'b' refused"),
    ("check_messages", {"agent_id": "b"}, None, None),
    ("agent_message", {"from_agent_id": "b", "to_agent_id": "a", "message": "x"}, "a", "from"),
    ("agent_message", {"from_agent_id": "a", "to_agent_id": "b", "message": "x"}, "a", None),
    ("call", {"agent_id": "b", "message": "hello"}, "a", "agent_id: 'b' refused"),
    ("call_end", {"call_id": "c_" + "0" * 26}, "a", "agent_id: None refused"),
    ("reply", {"channel_id": "cli:local", "message": "x", "agent_id": "a"}, "a", None),
    ("reply", {"channel_id": "telegram:5", "message": "x", "agent_id": "a"}, "a", None),
    ("reply", {"channel_id": "telegram:6", "message": "x", "agent_id": "a"}, "a", "mapped to"),
    ("reply", {"channel_id": "telegram:6", "message": "x", "agent_id": "b"}, None, None),
    ("history", {"channel_id": "cli:local", "agent_id": "a"}, "a", None),
    ("history", {"channel_id": "cli:local"}, "a", "holds other agents' talks too"),
    ("history", {"channel_id": "agent:b"}, "a", "holds other agents' talks too"),
    ("history", {"channel_id": "telegram:5"}, "a", None),
    ("history", {"channel_id": "telegram:6"}, "a", "may not read telegram:6"),
    ("history", {"channel_id": "telegram:9"}, "a", None),  # a message of a's came from it
]


@pytest.mark.parametrize(("name", "params", "agent", "refused"), ADMISSIONS)
async def test_who_may_ask_what(
    rules: Confinement,
    sqlite_store: Store,
    name: str,
    params: dict[str, Any],
    agent: str | None,
    refused: str | None,
) -> None:
    await sqlite_store.record_event(
        Event(
            id=new_event_id(),
            agent_id="a",
            channel_id="telegram:9",
            type="human_message",
            role="human",
            payload={"text": "hi"},
        )
    )
    method = _declared()[name]
    parsed = method.params.model_validate(params)
    if refused is None:
        await rules.admit(method, parsed, Caller(agent=agent))
        return
    with pytest.raises(RpcError) as caught:
        await rules.admit(method, parsed, Caller(agent=agent))
    assert caught.value.code == NOT_YOURS and refused in caught.value.message, caught.value


async def test_a_decision_is_taken_only_from_a_process_still_there(rules: Confinement) -> None:
    pair = _declared()["pair"]
    asked = pair.params.model_validate({"code": "ABCD12"})
    here = Peer(os.getpid(), os.getuid(), os.getgid())
    assert await rules.admit(pair, asked, Caller(peer=here)) is asked
    gone = Peer(9_999_999, os.getuid(), os.getgid())
    with pytest.raises(RpcError) as caught:
        await rules.admit(pair, asked, Caller(peer=gone))
    assert caught.value.code == NOT_YOURS and "was gone before" in caught.value.message


async def test_an_agents_events_never_show_what_the_allowlist_refused(rules: Confinement) -> None:
    method = _declared()["events"]
    asked = method.params.model_validate({"agent_id": "a", "rejected": True})
    as_agent = await rules.admit(method, asked, Caller(agent="a"))
    as_human = await rules.admit(method, asked, Caller())
    assert isinstance(as_agent, EventsParams) and isinstance(as_human, EventsParams)
    assert (as_agent.rejected, as_human.rejected) == (False, True)
