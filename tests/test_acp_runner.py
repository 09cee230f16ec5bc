"""What a host keeps of a process agent, with the scripted ACP agent as a real process and no
Temporal: the exact state it reports, a prompt refused while a turn runs, a process that dies
started again with its session loaded, a new worker (a new runner over the same folder) that
loads the kept session and prompts no message twice, and an agent that may not start a new
session staying offline with the reason."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentcomms.acp.client import PermissionAsk
from agentcomms.acp.host import ProcessAgents
from agentcomms.acp.pictures import Picture
from agentcomms.acp.runner import NotReady, ProcessAgent, Spec, Turn, Unavailable, Wiring
from agentcomms.agents.state import HookReport
from tests.support import acp_agent
from tests.support.acp_agent import log_of
from tests.support.waiting import eventually

SCRIPTED = (sys.executable, acp_agent.__file__)


class Heard:
    def __init__(self) -> None:
        self.reports: list[HookReport] = []
        self.turns: list[tuple[str, Turn]] = []
        self.processes: list[tuple[str, int, bool]] = []  # agent, pid, heard while it asked
        self.answer: str | None = "opt-0"
        self.asked = asyncio.Event()
        self.release = asyncio.Event()

    async def report(self, agent_id: str, report: HookReport) -> None:
        self.reports.append(report)

    async def ask(self, agent_id: str, ask: PermissionAsk, cwd: str) -> str | None:
        self.asked.set()
        await self.release.wait()
        return self.answer

    async def turn(self, agent_id: str, event: str, turn: Turn) -> None:
        self.turns.append((event, turn))

    async def process(self, agent_id: str, pid: int) -> None:
        self.processes.append((agent_id, pid, self.asked.is_set()))

    def events(self) -> list[str]:
        return [r.event for r in self.reports]


def state_of(agent: ProcessAgent) -> str:
    return agent.state


def host(tmp_path: Path, heard: Heard) -> ProcessAgents:
    return ProcessAgents(
        Wiring(
            tmp_path / "sessions",
            report=heard.report,
            ask=heard.ask,
            turns=[heard.turn],
            started=[heard.process],
        )
    )


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[tuple[ProcessAgent, Heard, Path]]:
    heard = Heard()
    agents = host(tmp_path, heard)
    work = tmp_path / "work"
    work.mkdir()
    agent = await agents.agent("a1", Spec(command=SCRIPTED, cwd=work))
    await agent.ensure_started()
    yield agent, heard, work
    await agents.close()


async def test_the_state_is_exact_from_prompt_to_turn_end_and_a_prompt_waits_meanwhile(
    running: tuple[ProcessAgent, Heard, Path],
) -> None:
    agent, heard, _ = running
    await agent.submit(["e1"], "acp:ask 4 touch x\nacp:say done", "e1 needle")
    await asyncio.wait_for(heard.asked.wait(), 10)
    assert state_of(agent) == "waiting"
    with pytest.raises(NotReady, match="is waiting"):
        await agent.submit(["e2"], "too soon", "e2")
    heard.release.set()
    await eventually(lambda: agent.state == "ready")
    await eventually(lambda: heard.events()[-1] == "TurnEnd")
    assert heard.events() == [
        "SessionStart", "TurnStart", "PermissionRequest", "PermissionAnswered", "TurnEnd"
    ]  # fmt: skip
    start = heard.reports[1]
    assert start.prompt == "e1 needle" and start.session_id == agent.session_id
    assert heard.reports[2].tool == "touch x"
    assert [r.at_ns for r in heard.reports] == sorted({r.at_ns for r in heard.reports})
    [(_, turn)] = [t for t in heard.turns if t[0] == "TurnEnd"]
    assert turn.reply_text() == "chose opt-0done" and turn.event_ids == ["e1"]  # all chunks


async def test_a_process_that_dies_is_started_again_with_its_session(
    running: tuple[ProcessAgent, Heard, Path],
) -> None:
    agent, heard, work = running
    session = agent.session_id
    await agent.submit(["e1"], "acp:die", "e1")
    await eventually(lambda: "SessionEnd" in heard.events())
    assert heard.reports[heard.events().index("SessionEnd")].summary == (
        "the agent's process exited with code 3"
    )
    await eventually(lambda: agent.state == "ready" and agent.alive, timeout=10)
    assert agent.session_id == session
    assert [e["load_session"] for e in log_of(work) if "load_session" in e] == [session]


async def test_a_new_worker_loads_the_kept_session_and_prompts_nothing_twice(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    first = host(tmp_path, Heard())
    agent = await first.agent("a1", Spec(command=SCRIPTED, cwd=work))
    await agent.ensure_started()
    await agent.submit(["e1"], "hello", "hello")
    await eventually(lambda: agent.state == "ready")
    session, pid = agent.session_id, agent.pid
    # The worker is killed: nothing is stopped cleanly, its agent is left running.
    kept = json.loads((tmp_path / "sessions" / "a1.json").read_text())
    assert kept["session_id"] == session and kept["prompted"] == ["e1"]

    second = host(tmp_path, Heard())
    again = await second.agent("a1", Spec(command=SCRIPTED, cwd=work))
    assert again.prompted("e1") and not again.prompted("e2")
    await again.ensure_started()
    try:
        assert again.session_id == session and again.pid != pid
        await eventually(lambda: not Path(f"/proc/{pid}").exists())  # the leftover was ended
        assert [e["load_session"] for e in log_of(work) if "load_session" in e] == [session]
    finally:
        await second.close()
        await first.close()


async def test_an_agent_that_may_not_start_a_new_session_stays_offline_and_says_why(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    (sessions / "a1.json").write_text(json.dumps({"session_id": "sess-gone", "prompted": []}))
    heard = Heard()
    agents = host(tmp_path, heard)
    agent = await agents.agent("a1", Spec(command=SCRIPTED, cwd=work, new_session_if_lost=False))
    try:
        with pytest.raises(Unavailable, match="could not load session sess-gone"):
            await agent.ensure_started()
        assert agent.state == "offline" and not agent.alive
        await eventually(lambda: heard.events() == ["SessionEnd"])
        assert "new-session-if-lost" in (heard.reports[0].summary or "")
    finally:
        await agents.close()


async def test_a_worker_that_starts_again_resumes_the_agents_its_last_run_ran_not_those_stopped(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    first = host(tmp_path, Heard())
    kept = await first.agent("kept", Spec(command=SCRIPTED, cwd=work))
    await kept.ensure_started()
    stopped = await first.agent("stopped", Spec(command=SCRIPTED, cwd=work))
    await stopped.ensure_started()
    session = kept.session_id
    await first.stop("stopped")  # `agents stop`: for good
    await first.close()  # the worker shuts down

    heard = Heard()
    second = host(tmp_path, heard)
    try:
        second.resume()
        resumed = await eventually(lambda: second.get("kept"))
        await eventually(lambda: resumed.state == "ready" and resumed.alive, timeout=10)
        assert resumed.session_id == session and resumed.spec.cwd == work
        assert second.get("stopped") is None
        assert heard.events() == ["SessionStart"]
    finally:
        await second.close()


async def test_a_turn_cancelled_while_it_asks_answers_its_request_cancelled(
    running: tuple[ProcessAgent, Heard, Path],
) -> None:
    agent, heard, work = running
    await agent.submit(["e1"], "acp:ask 4 touch x", "e1")
    await asyncio.wait_for(heard.asked.wait(), 10)  # and nobody answers
    assert await agent.cancel()
    await eventually(lambda: [e for e in log_of(work) if "permission" in e])
    [asked] = [e for e in log_of(work) if "permission" in e]
    assert asked["chosen"] is None  # "cancelled", as ACP asks of a client
    await eventually(lambda: heard.events()[-1] == "TurnEnd")
    assert state_of(agent) == "ready"
    [(_, turn)] = [t for t in heard.turns if t[0] == "TurnEnd"]
    assert turn.stop_reason == "cancelled"


async def test_the_agents_process_is_told_at_its_start_and_before_each_permission_is_asked(
    running: tuple[ProcessAgent, Heard, Path],
) -> None:
    # The gateway learns it before anything the agent runs could ask it, and a gateway started
    # since the agent did hears it again before the human is asked.
    agent, heard, _ = running
    assert heard.processes == [("a1", agent.pid, False)]
    await agent.submit(["e1"], "acp:ask 4 touch x", "e1")
    await asyncio.wait_for(heard.asked.wait(), 10)
    assert heard.processes == [("a1", agent.pid, False)] * 2
    heard.release.set()


async def test_a_slow_start_lets_the_message_wait_and_a_stop_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    slow = (
        sys.executable,
        "-c",
        "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)",
        str(pid_file),
    )
    agents = ProcessAgents(
        Wiring(tmp_path / "sessions", report=Heard().report, ask=Heard().ask, start_wait_s=0.2)
    )
    agent = await agents.agent("slow", Spec(command=slow, cwd=tmp_path))
    with pytest.raises(Unavailable, match="is still starting; the message waits"):
        await agent.submit(["e1"], "hello", "hello")
    assert not agent.prompted("e1")
    pid = int(await eventually(lambda: pid_file.exists() and pid_file.read_text()))
    assert running_pid(pid)  # the start goes on beside the delivery that gave up
    await agents.stop("slow")
    await eventually(lambda: not running_pid(pid), timeout=10)


def running_pid(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


async def test_a_new_session_cancels_the_turn_is_kept_and_leaves_the_old_one(
    running: tuple[ProcessAgent, Heard, Path],
) -> None:
    agent, heard, work = running
    old = agent.session_id
    await agent.submit(["e1"], "acp:hang", "e1")
    await eventually(lambda: [e for e in log_of(work) if "prompt" in e])
    await agent.new_session()
    assert agent.state == "ready" and agent.session_id not in (None, old)
    [(_, turn)] = [t for t in heard.turns if t[0] == "TurnEnd"]
    assert turn.stop_reason == "cancelled"
    kept = json.loads((work.parent / "sessions" / "a1.json").read_text())
    assert kept["session_id"] == agent.session_id and kept["prompted"] == ["e1"]
    assert (work / ".acp-agent-sessions" / f"{old}.json").exists()  # the agent's, untouched
    # An agent whose process is not running opens its new session as it starts.
    second = agent.session_id
    await agent.stop(for_good=False)
    await agent.new_session()
    await eventually(lambda: agent.state == "ready" and agent.alive, timeout=10)
    assert agent.session_id not in (None, old, second)
    assert not [e for e in log_of(work) if "load_session" in e]


@pytest.mark.parametrize("takes_images", [True, False])
async def test_an_image_goes_as_an_image_block_only_to_an_agent_that_takes_them(
    tmp_path: Path, takes_images: bool
) -> None:
    work = tmp_path / "work"
    saved = work / ".agentcomms" / "attachments"
    saved.mkdir(parents=True)
    png, elsewhere = saved / "evt-shot.png", tmp_path / "secret.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n picture")
    elsewhere.write_bytes(b"\x89PNG\r\n\x1a\n not the agent's")
    agents = host(tmp_path, Heard())
    command = (*SCRIPTED, "--images") if takes_images else SCRIPTED
    agent = await agents.agent("a1", Spec(command=command, cwd=work))
    pictures = [Picture(png, "image/png"), Picture(elsewhere, "image/png")]
    try:
        await agent.ensure_started()
        await agent.submit(["e1"], f"[photo: {png}]", "e1", pictures=pictures)
        [prompted] = await eventually(lambda: [e for e in log_of(work) if "prompt" in e])
    finally:
        await agents.close()
    assert prompted["prompt"] == f"[photo: {png}]"  # the path, always
    if not takes_images:
        assert "images" not in prompted
        return
    # Only the one saved in the agent's own attachments folder, whole.
    [image] = prompted["images"]
    assert image["mimeType"] == "image/png"
    assert base64.b64decode(image["data"]) == png.read_bytes()
