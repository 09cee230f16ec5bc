"""The ACP client against the project's scripted ACP agent, a real process over its real stdio:
a streamed reply, a tool call, a permission request with four options answered with one of
them, a cancelled turn, an agent that dies mid-turn, and a session loaded by a new process."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentcomms.acp import kinds
from agentcomms.acp.asking import as_tool_call, refused_by, reject_option
from agentcomms.acp.client import (
    AcpProcess,
    AgentFailedToStart,
    PermissionAsk,
    PermissionOption,
    Update,
)
from agentcomms.acp.rpc import ConnectionLost
from tests.support import acp_agent

SCRIPTED = [sys.executable, acp_agent.__file__]


class Seen:
    def __init__(self) -> None:
        self.updates: list[Update] = []
        self.asks: list[PermissionAsk] = []
        self.choose: str | None = None

    def on_update(self, update: Update) -> None:
        self.updates.append(update)

    async def on_permission(self, ask: PermissionAsk) -> str | None:
        self.asks.append(ask)
        return self.choose

    def reply(self) -> str:
        return "".join(u.text or "" for u in self.updates if u.kind == "agent_message_chunk")


def log_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def started(tmp: Path, seen: Seen) -> AcpProcess:
    return await AcpProcess.start(
        SCRIPTED,
        cwd=tmp,
        env={"ACP_AGENT_STATE": str(tmp / "state"), "ACP_AGENT_LOG": str(tmp / "log.jsonl")},
        on_update=seen.on_update,
        on_permission=seen.on_permission,
    )


@pytest.fixture(scope="module")
async def agent(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[AcpProcess, Seen]]:
    seen = Seen()
    process = await started(tmp_path_factory.mktemp("acp"), seen)
    yield process, seen
    await process.stop()


async def test_a_reply_streams_in_chunks_and_a_tool_call_shows(
    agent: tuple[AcpProcess, Seen], tmp_path: Path
) -> None:
    process, seen = agent
    seen.updates.clear()
    session = await process.new_session(tmp_path)
    reason = await process.prompt(
        session, [{"type": "text", "text": "acp:tool ls -la\nacp:say the folder has three files"}]
    )
    assert reason == "end_turn"
    assert seen.reply() == "the folder has three files"
    assert len([u for u in seen.updates if u.kind == "agent_message_chunk"]) > 1
    [call] = [u for u in seen.updates if u.kind == "tool_call"]
    assert call.raw["title"] == "ls -la" and call.session_id == session


async def test_a_permission_request_offers_the_agents_four_options_and_takes_the_one_chosen(
    agent: tuple[AcpProcess, Seen], tmp_path: Path
) -> None:
    process, seen = agent
    seen.updates.clear()
    seen.choose = "opt-2"
    session = await process.new_session(tmp_path)
    assert await process.prompt(session, [{"type": "text", "text": "acp:ask 4 rm -rf build"}]) == (
        "end_turn"
    )
    ask = seen.asks[-1]
    assert ask.title == "rm -rf build" and ask.session_id == session
    assert [(o.option_id, o.kind) for o in ask.options] == [
        ("opt-0", "allow_once"),
        ("opt-1", "allow_always"),
        ("opt-2", "reject_once"),
        ("opt-3", "reject_always"),
    ]
    assert seen.reply() == "chose opt-2"

    seen.choose = None  # the client answers "cancelled"
    assert await process.prompt(session, [{"type": "text", "text": "acp:ask 2"}]) == "cancelled"


async def test_a_turn_cancelled_ends_with_its_reason(
    agent: tuple[AcpProcess, Seen], tmp_path: Path
) -> None:
    process, _ = agent
    session = await process.new_session(tmp_path)
    turn = asyncio.create_task(process.prompt(session, [{"type": "text", "text": "acp:hang"}]))
    await asyncio.sleep(0.05)
    assert not turn.done()
    await process.cancel(session)
    assert await asyncio.wait_for(turn, 10) == "cancelled"


async def test_an_agent_that_dies_mid_turn_fails_the_turn_and_a_new_process_loads_its_session(
    tmp_path: Path,
) -> None:
    seen = Seen()
    first = await started(tmp_path, seen)
    assert first.can_load
    session = await first.new_session(tmp_path)
    assert await first.prompt(session, [{"type": "text", "text": "remember the blue door"}])
    with pytest.raises(ConnectionLost):
        await first.prompt(session, [{"type": "text", "text": "acp:die"}])
    assert await asyncio.wait_for(first.wait(), 10) == 3
    assert not first.alive

    second = await started(tmp_path, seen)
    try:
        seen.updates.clear()
        await second.load_session(session, tmp_path)
        replayed = [u.text for u in seen.updates if u.kind == "user_message_chunk"]
        assert replayed == ["remember the blue door", "acp:die"]
        await second.prompt(session, [{"type": "text", "text": "and now?"}])
        assert seen.reply() == "heard: and now?"
    finally:
        await second.stop()
    prompts = [e["prompt"] for e in log_of(tmp_path / "log.jsonl") if "prompt" in e]
    assert prompts == ["remember the blue door", "acp:die", "and now?"]


async def test_a_command_that_is_no_acp_agent_says_so(tmp_path: Path) -> None:
    seen = Seen()
    with pytest.raises(AgentFailedToStart, match="did not answer ACP's initialize"):
        await AcpProcess.start(
            [sys.executable, "-c", "print('hello')"],
            cwd=tmp_path,
            on_update=seen.on_update,
            on_permission=seen.on_permission,
        )
    with pytest.raises(AgentFailedToStart, match="could not run 'no-such-agent-here'"):
        await AcpProcess.start(
            ["no-such-agent-here"],
            cwd=tmp_path,
            on_update=seen.on_update,
            on_permission=seen.on_permission,
        )


def ask_of(kind: str, title: str, raw: dict[str, Any], *kinds: str) -> PermissionAsk:
    options = tuple(PermissionOption(f"o{i}", f"option {i}", k) for i, k in enumerate(kinds))
    call = {"toolCallId": "c1", "title": title, "kind": kind, "rawInput": raw}
    return PermissionAsk(session_id="s", tool_call=call, options=options)


@pytest.mark.parametrize(
    ("kind", "title", "raw", "tool", "tool_input"),
    [
        ("execute", "rm -rf build", {}, "Bash", {"command": "rm -rf build"}),
        ("execute", "Run it", {"command": "ls"}, "Bash", {"command": "ls"}),
        ("edit", "Write x", {"path": "/a/x"}, "Edit", {"path": "/a/x"}),
        ("fetch", "Fetch", {"url": "https://x.org"}, "WebFetch", {"url": "https://x.org"}),
        ("think", "Ponder", {"a": 1}, "Ponder", {"a": 1}),
    ],
)
def test_a_tool_call_is_read_in_the_never_lists_names(
    kind: str, title: str, raw: dict[str, Any], tool: str, tool_input: dict[str, Any]
) -> None:
    assert as_tool_call(ask_of(kind, title, raw)) == (tool, tool_input)


@pytest.mark.parametrize(
    ("kinds", "rejected"),
    [
        (("allow_once", "allow_always", "reject_once", "reject_always"), "o2"),
        (("allow_once", "reject_always"), "o1"),
        (("allow_once", "allow_always"), None),  # no reject: "cancelled", the turn ends
    ],
)
def test_a_refusal_takes_the_agents_narrowest_reject(
    kinds: tuple[str, ...], rejected: str | None
) -> None:
    assert reject_option(ask_of("execute", "ls", {}, *kinds).options) == rejected


def test_the_never_list_and_the_humans_commands_refuse_in_acp_terms() -> None:
    rules = ["Bash(rm -rf *)", "Edit(/etc/*)"]
    assert refused_by(rules, ask_of("execute", "rm -rf /", {}), "/w") == "Bash(rm -rf *)"
    assert refused_by(rules, ask_of("execute", "ls", {}), "/w") is None
    edit = ask_of("edit", "Edit", {"file_path": "/etc/passwd"})
    assert refused_by(rules, edit, "/w") == "Edit(/etc/*)"


def test_a_known_kind_is_found_in_the_agents_prefix_and_says_what_to_install_without_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no node, no npm, no adapters
    assert kinds.find("codex", prefix=tmp_path) is None
    program = tmp_path / "node_modules" / ".bin" / "gemini"
    program.parent.mkdir(parents=True)
    program.touch()
    assert kinds.find("gemini", prefix=tmp_path) == [str(program), "--acp"]
    with pytest.raises(kinds.KindUnavailable, match=r"node or npm is not on PATH.*codex-acp@"):
        kinds.install("codex", prefix=tmp_path)
    with pytest.raises(kinds.KindUnavailable, match="unknown kind 'emacs'; known: gemini"):
        kinds.find("emacs", prefix=tmp_path)
