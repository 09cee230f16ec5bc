"""Claude Code's reporting hooks post to the gateway's loopback door instead of starting a
process; the hooks that decide stay commands that fail closed.

The install is checked on its files (what Claude Code reads), the door on a real stack: a
stand-in agent in a real tmux pane, its reports posted as Claude Code posts them (the same JSON,
the headers its settings name), its state in a real mailbox.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.agents.install import (
    HOOK_ENV_VARS,
    Target,
    hook_url,
    is_our_http_hook,
)
from agentcomms.agents.install_agents import plan
from agentcomms.agents.installed import inspect
from agentcomms.agents.post_hook import post_command, posted_to
from agentcomms.hook_token import hook_token, token_path
from gateway.agents.hook_http import hook_started_ns
from tests.fakes.anthropic import bash, text
from tests.support.agents import claude_with_agentcomms
from tests.support.cli import AGENTCOMMS
from tests.support.fake_agent import FakeAgent, registered, start_fake_agent, state_is
from tests.support.mailbox import settled_history, signal_payloads
from tests.support.stack import Stack, register, running_stack
from tests.support.tmux import SENT_HEADER, Tmux, as_sent
from tests.support.waiting import eventually
from workflows.mailbox.client import mailbox_handle

TOKEN = "t" * 43
URL = hook_url(8236, "claude-code")


def target(tmp_path: Path, **extra: Any) -> Target:
    given: dict[str, Any] = {"hook_url": URL, "hook_token": TOKEN, **extra}
    return Target(
        "claude-code", home=tmp_path, project=tmp_path / "project", argv=(AGENTCOMMS,), **given
    )


def hooks_of(tmp_path: Path) -> dict[str, list[dict[str, Any]]]:
    doc = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    return {e: [h for g in groups for h in g["hooks"]] for e, groups in doc["hooks"].items()}


def test_reporting_hooks_post_and_deciding_hooks_stay_commands(tmp_path: Path) -> None:
    plan(target(tmp_path, never=("Bash(rm -rf *)",))).apply()
    hooks = hooks_of(tmp_path)
    assert [h["type"] for h in hooks["PermissionRequest"]] == ["command"]
    # Claude Code waits for each PreToolUse hook before the tool runs: none posts there, and
    # only the never-list's handlers are left, commands that refuse when they fail.
    refusals = hooks["PreToolUse"]
    assert refusals and all(h["type"] == "command" and "--never" in h["command"] for h in refusals)
    for event in ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd"):
        (posted,) = hooks[event]
        assert posted["url"] == URL and posted["headers"]["X-Agentcomms-Token"] == TOKEN
        assert posted["headers"]["X-Agentcomms-Pane"] == "$TMUX_PANE"
        # Claude Code fills a header from the environment only for the variables listed.
        assert posted["allowedEnvVars"] == HOOK_ENV_VARS
    # Installed twice: nothing changes; doctor counts each event's report once.
    assert plan(target(tmp_path, never=("Bash(rm -rf *)",))).changes == []
    found = inspect(target(tmp_path))
    assert found[0].ok, found[0].detail
    # A posted report runs no program that could be gone.
    assert not any("gone" in f.detail for f in found), [f.detail for f in found]
    # Posting to another port than the gateway's door: the agent's state goes unheard.
    moved = inspect(target(tmp_path, hook_url=hook_url(9000, "claude-code")))
    (door,) = [f for f in moved if f.name.endswith("hook door")]
    assert not door.ok and "127.0.0.1:8236" in door.detail and door.fix is not None


def test_uninstall_removes_the_posted_hooks_and_leaves_the_users_own(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    own = {"type": "http", "url": "http://127.0.0.1:9999/my-logger"}
    settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [own]}]}}))
    plan(target(tmp_path)).apply()
    assert own in hooks_of(tmp_path)["Stop"]
    # An install by the command-only agentcomms (the door turned off) replaces the posts.
    plan(target(tmp_path, hook_url=None, hook_token=None)).apply()
    assert [h["type"] for h in hooks_of(tmp_path)["PostToolUse"]] == ["command"]
    assert [h["type"] for h in hooks_of(tmp_path)["PreToolUse"]] == ["command"]
    plan(target(tmp_path), uninstall=True).apply()
    assert json.loads(settings.read_text()) == {"hooks": {"Stop": [{"hooks": [own]}]}}


# Codex's and Gemini CLI's file, the hooks that decide (always `agentcomms hook`), and the one
# before each call, which refuses the never-list when there is one.
COMMAND_AGENTS = {
    "codex": (Path(".codex") / "hooks.json", {"PermissionRequest"}, "PreToolUse"),
    "gemini": (Path(".gemini") / "settings.json", set(), "BeforeTool"),
}


@pytest.mark.parametrize("kind", COMMAND_AGENTS)
def test_codex_and_gemini_post_their_reports_and_keep_deciding_hooks_commands(
    tmp_path: Path, home: Path, kind: Literal["codex", "gemini"]
) -> None:
    path, deciding, before_call = COMMAND_AGENTS[kind]
    url, token_file = hook_url(8236, kind), token_path()
    posting = Target(
        kind, home=tmp_path, argv=(AGENTCOMMS,), hook_url=url, hook_token_file=token_file
    )

    def hooks() -> dict[str, list[str]]:
        doc = json.loads((tmp_path / path).read_text())
        return {e: [h["command"] for g in gs for h in g["hooks"]] for e, gs in doc["hooks"].items()}

    plan(posting).apply()
    for event, (command,) in hooks().items():
        if event in deciding:
            assert posted_to(command, kind) is None and "hook" in command
        else:  # the token is read from its file, never written on a command line
            assert posted_to(command, kind) == url, event
            assert "hook.token" in command and hook_token() not in command
    assert plan(posting).changes == []
    (found, *_) = inspect(posting)
    assert found.ok and found.detail.startswith(f"{len(hooks())} hooks"), found.detail
    # Another port than the gateway's door: the agent's state goes unheard, and doctor says so.
    moved = inspect(replace(posting, hook_url=hook_url(9000, kind)))
    assert any(f.name.endswith("hook door") and not f.ok for f in moved)

    # With a never-list, the hook before each call refuses it: `agentcomms hook`, failing closed.
    plan(replace(posting, never=("Bash(rm -rf *)",))).apply()
    (refusing,) = hooks()[before_call]
    assert posted_to(refusing, kind) is None and "--never" in refusing
    # The door turned off: every hook is `agentcomms hook` again, none posts.
    plan(replace(posting, hook_url=None, hook_token_file=None)).apply()
    assert not any(posted_to(c, kind) for cs in hooks().values() for c in cs)
    plan(posting, uninstall=True).apply()
    assert not (tmp_path / path).exists() or "hooks" not in json.loads(
        (tmp_path / path).read_text()
    )


@pytest.mark.parametrize(
    ("handler", "ours"),
    [
        ({"type": "http", "url": "http://127.0.0.1:8236/agentcomms/hook/claude-code"}, True),
        ({"type": "http", "url": "http://127.0.0.1:9/agentcomms/hook/claude-code"}, True),
        ({"type": "http", "url": "http://127.0.0.1:8236/agentcomms/hook/codex"}, False),
        ({"type": "http", "url": "http://evil.example:8236/agentcomms/hook/claude-code"}, False),
        ({"type": "http", "url": "http://127.0.0.1:8236/agentcomms/hook/claude-code/x"}, False),
        ({"type": "command", "url": "http://127.0.0.1:8236/agentcomms/hook/claude-code"}, False),
        ({"type": "http"}, False),
        ("http", False),
    ],
)
def test_which_posted_hooks_are_agentcomms(handler: object, ours: bool) -> None:
    assert is_our_http_hook(handler, "claude-code") is ours


NOW = 1_800_000_000 * 10**9


@pytest.mark.parametrize(
    ("given", "at_ns"),
    [
        (None, NOW),  # Claude Code's posts: their arrival
        (str(NOW - 5 * 10**9), NOW - 5 * 10**9),  # a background hook that started 5 s ago
        (str(NOW + 10**9), NOW),  # never later than its arrival
        (str(NOW - 3600 * 10**9), NOW),  # nor so old that it would hold back the rest
        ("1.5e18", NOW),
        ("", NOW),
    ],
)
def test_a_report_is_ordered_by_its_hooks_start_within_bounds(
    given: str | None, at_ns: int
) -> None:
    assert hook_started_ns(given, NOW) == at_ns


# ---- the door --------------------------------------------------------------------------------


@pytest.fixture
async def door_stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, home: Path
) -> AsyncIterator[Stack]:
    def with_door(cfg: Any) -> Any:
        return cfg.model_copy(update={"server": cfg.server.model_copy(update={"hook_port": 0})})

    async with running_stack(temporal_env.client, tmp_path, configure=with_door) as s:
        yield s


def door(stack: Stack, kind: str = "claude-code") -> str:
    reports = stack.gateway.hook_reports
    assert reports is not None
    return f"http://127.0.0.1:{reports.server.port}/agentcomms/hook/{kind}"


async def post(url: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.post(url, json=body, headers=headers, timeout=10)


@dataclass
class DoorAgent:
    """A stand-in agent registered on the door's stack, and the headers its posts carry."""

    agent_id: str
    fake: FakeAgent
    headers: dict[str, str]


async def door_agent(stack: Stack, tmux: Tmux, tmp_path: Path, name: str) -> DoorAgent:
    agent_id = stack.agent_id(name)
    fake = await start_fake_agent(tmux, tmp_path, stack.cfg.server.socket(), name)
    await register(stack, agent_id, tmux, fake.target, submit_delay_ms=0)
    await eventually(lambda: registered(stack, agent_id))
    # As the agent sends them: the pane and its tmux server from the agent's environment.
    headers = {
        "X-Agentcomms-Token": hook_token(),
        "X-Agentcomms-Pane": fake.pane_id,
        "X-Agentcomms-Tmux": f"{tmux.socket},1,0",
        "X-Agentcomms-Agent": "",
    }
    return DoorAgent(agent_id, fake, headers)


async def test_posted_reports_move_the_agents_state_as_its_hooks_do(
    door_stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    stack = door_stack
    claude = await door_agent(stack, tmux, tmp_path, "claude")
    agent_id, from_pane = claude.agent_id, claude.headers
    url = door(stack)
    said = {"session_id": "s-1", "transcript_path": "/x", "cwd": "/"}
    started = await post(url, {**said, "hook_event_name": "SessionStart"}, **from_pane)
    assert started.status_code == 204
    await eventually(lambda: state_is(stack, agent_id, "ready"))
    prompt = {**said, "hook_event_name": "UserPromptSubmit", "prompt": "migrate"}
    assert (await post(url, prompt, **from_pane)).status_code == 204
    await eventually(lambda: state_is(stack, agent_id, "busy"))
    # Named by its id instead (AGENTCOMMS_AGENT_ID), outside tmux.
    named = {"X-Agentcomms-Token": hook_token(), "X-Agentcomms-Agent": agent_id}
    stop = {**said, "hook_event_name": "Stop", "last_assistant_message": "done"}
    assert (await post(url, stop, **named)).status_code == 204
    await eventually(lambda: state_is(stack, agent_id, "ready"))


async def test_a_prompt_taken_before_its_typing_was_recorded_still_says_submitted(
    door_stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    """The agent can take a typed prompt, and its hook stamp the report, before the mailbox has
    recorded the typing: the report is older than the state then, yet it is the one that says
    the message was submitted (measured with Claude Code on a loaded machine)."""
    stack = door_stack
    claude = await door_agent(stack, tmux, tmp_path, "claude")
    agent_id, fake, from_pane = claude.agent_id, claude.fake, claude.headers
    url, said = door(stack), {"session_id": "s-1"}
    assert (await post(url, {**said, "hook_event_name": "SessionStart"}, **from_pane)).is_success
    await eventually(lambda: state_is(stack, agent_id, "ready"))
    taken_ns = time.time_ns()  # the hook's start, before the typing is recorded
    sending = asyncio.create_task(
        stack.call("send", agent_id=agent_id, message="run the tests", wait=True, timeout=15)
    )
    await eventually(lambda: fake.typed() == as_sent("run the tests"))
    await eventually(lambda: state_is(stack, agent_id, "busy"))  # typing recorded
    prompt = {
        **said,
        "hook_event_name": "UserPromptSubmit",
        "prompt": f"{SENT_HEADER}run the tests",
    }
    late = await post(url, prompt, **from_pane, **{"X-Agentcomms-At": str(taken_ns)})
    assert late.status_code == 204
    result = await sending
    assert (result["status"], result["delivered"]) == ("submitted", True)


async def test_codexs_reports_beside_its_first_turn_leave_it_busy(
    door_stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    """Codex starts its session with the first prompt, both hooks in the background, and
    writes the task's title in a thread of its own, whose end its notify tells: neither a
    SessionStart stamped after the prompt nor that notify may show the agent ready mid-turn
    (where a message would be typed into the turn)."""
    stack = door_stack
    codex = await door_agent(stack, tmux, tmp_path, "codex")
    agent_id, from_pane = codex.agent_id, codex.headers
    url = door(stack, "codex")
    said = {"session_id": "s-1"}
    taken_ns = time.time_ns()
    prompt = {**said, "hook_event_name": "UserPromptSubmit", "prompt": "count the files"}
    assert (await post(url, prompt, **from_pane, **{"X-Agentcomms-At": str(taken_ns)})).is_success
    await eventually(lambda: state_is(stack, agent_id, "busy"))
    started = {**said, "hook_event_name": "SessionStart"}
    at = {"X-Agentcomms-At": str(taken_ns + 2_000_000)}
    assert (await post(url, started, **from_pane, **at)).is_success

    async def notify(at_ns: int, thread: str) -> None:
        """Codex's notify of `thread`'s turn, as it sends it: through the socket."""
        payload = {"type": "agent-turn-complete", "thread-id": thread}
        pane = {"pane": codex.fake.pane_id, "tmux_socket": tmux.socket}
        await stack.call(
            "agent_hook", kind="codex", event="agent-turn-complete", at_ns=at_ns,
            payload=payload, **pane,
        )  # fmt: skip

    await notify(taken_ns + 150_000_000, "the title's")

    async def after(event: bytes) -> str | None:
        """The state once the mailbox has taken `event` (a task ended after it)."""
        history = await settled_history(mailbox_handle(stack.client, agent_id))
        reports = signal_payloads(history, "report") if history else []
        if not any(event in p.data for p in reports):
            return None
        snapshot = await stack.gateway.mailbox.snapshot(agent_id)
        return snapshot.readiness.state if snapshot else None

    assert await eventually(lambda: after(b"SessionStart")) == "busy"
    assert await eventually(lambda: after(b"agent-turn-complete")) == "busy"
    # The session's own turn ends in its notify as in its Stop hook.
    await notify(time.time_ns(), "s-1")
    await eventually(lambda: state_is(stack, agent_id, "ready"))


@pytest.mark.parametrize(
    ("body", "headers", "path", "status"),
    [
        # Not the user's: no token, or another one.
        ({"hook_event_name": "Stop"}, {}, "claude-code", 401),
        ({"hook_event_name": "Stop"}, {"X-Agentcomms-Token": "guess"}, "claude-code", 401),
        # A decision is never taken here: the agent's own command hook asks (fails closed).
        ({"hook_event_name": "PermissionRequest"}, None, "claude-code", 403),
        ({"no": "event"}, None, "claude-code", 400),
        ({"hook_event_name": "Stop"}, None, "aider", 404),
        # Posted from outside tmux and naming no agent: nothing to report for, and no wait.
        ({"hook_event_name": "Stop"}, None, "claude-code", 204),
    ],
)
async def test_the_door_takes_only_the_users_reports(
    door_stack: Stack,
    body: dict[str, Any],
    headers: dict[str, str] | None,
    path: str,
    status: int,
) -> None:
    given = {"X-Agentcomms-Token": hook_token()} if headers is None else headers
    url = door(door_stack).rpartition("/")[0] + f"/{path}"
    assert (await post(url, body, **given)).status_code == status


async def test_the_door_answers_only_its_own_host_and_route(door_stack: Stack) -> None:
    url = door(door_stack)
    token = {"X-Agentcomms-Token": hook_token()}
    # A page in a browser that rebinds a name of its own to 127.0.0.1 sends its own Host.
    rebound = await post(url, {"hook_event_name": "Stop"}, Host="evil.example", **token)
    assert rebound.status_code in (400, 403, 421)
    async with httpx.AsyncClient() as client:
        assert (await client.get(url, headers=token)).status_code == 405
        other = url.replace("/agentcomms/hook/claude-code", "/")
        assert (await client.get(other, headers=token)).status_code == 404


# What the agents' shells run for a posting hook, and how: Codex `$SHELL -lc` (sh here), Gemini CLI
# `bash -c`, the hook's JSON on stdin, the pane's environment.
SHELLS = {"codex": ["sh", "-lc"], "gemini": ["bash", "-c"]}


def run_posting_hook(kind: str, url: str, body: dict[str, Any], env: dict[str, str]) -> Any:
    command = post_command(kind, url, str(token_path()))
    return subprocess.run(
        [*SHELLS[kind], command],
        input=json.dumps(body),
        env={"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_the_posting_hook_sends_the_body_whole_with_its_start_and_the_token_from_its_file(
    home: Path,
) -> None:
    """The request as the shell writes it, read raw: bytes counted (not characters), the
    hook's own start stamped, the token from its file, the pane from the environment."""
    import socket
    import threading
    import time

    token = hook_token()
    listener = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def answer() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < 60:
                data += conn.recv(65536)
            got.append(data)
            conn.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")

    thread = threading.Thread(target=answer)
    thread.start()
    url = hook_url(listener.getsockname()[1], "codex")
    body = {"hook_event_name": "Stop", "last_assistant_message": "fini ✓ — déjà"}
    before = time.time_ns()
    done = run_posting_hook("codex", url, body, {"TMUX_PANE": "%7", "TMUX": "/tmp/t,1,0"})
    thread.join(10)
    listener.close()
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    head, _, sent = got[0].partition(b"\r\n\r\n")
    headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
    assert head.startswith(b"POST /agentcomms/hook/codex HTTP/1.1")
    assert json.loads(sent) == body and int(headers["Content-Length"]) == len(sent)
    assert headers["X-Agentcomms-Token"] == token
    assert (headers["X-Agentcomms-Pane"], headers["X-Agentcomms-Tmux"]) == ("%7", "/tmp/t,1,0")
    assert before <= int(headers["X-Agentcomms-At"]) <= time.time_ns()


async def test_codex_and_gemini_post_their_reports_from_the_shell_they_start(
    door_stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    """The shell an agent starts for a reporting hook posts its JSON to the door (no Python):
    the state moves as the hook command's reports move it, the agent reads nothing on its
    output, and with the gateway gone the hook ends at once, silent, as if not installed."""
    stack = door_stack
    hook_token()  # made at first use, as `install` makes it
    said = {"session_id": "s-1", "transcript_path": "/x", "cwd": "/"}
    turns = {"codex": ("UserPromptSubmit", "Stop"), "gemini": ("BeforeAgent", "AfterAgent")}
    for kind, (starts, ends) in turns.items():
        agent = await door_agent(stack, tmux, tmp_path, kind)
        agent_id = agent.agent_id
        env = {"TMUX": f"{tmux.socket},1,0", "TMUX_PANE": agent.fake.pane_id}
        url = door(stack, kind)
        for event, state in ((starts, "busy"), (ends, "ready"), (starts, "busy")):
            # A prompt in another script than Latin: the length posted is in bytes.
            body = {**said, "hook_event_name": event, "prompt": "mesure la qualité ✓"}
            done = await asyncio.to_thread(run_posting_hook, kind, url, body, env)
            assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
            await eventually(lambda: state_is(stack, agent_id, state))  # noqa: B023
    reports = stack.gateway.hook_reports
    assert reports is not None
    await reports.close()
    gone = await asyncio.to_thread(run_posting_hook, "codex", url, {"hook_event_name": "Stop"}, env)
    assert (gone.returncode, gone.stdout, gone.stderr) == (0, "", "")


# ---- the real Claude Code --------------------------------------------------------------------


@pytest.mark.usefixtures("agent_clis")
async def test_claude_codes_posted_reports_say_a_message_was_submitted(
    temporal_env: WorkflowEnvironment, tmux: Tmux, tmp_path: Path, home: Path
) -> None:
    """The one wire end to end: the real Claude Code posts its UserPromptSubmit (and the rest)
    to the door, with the pane filled from its environment; only that report says a message
    was submitted, and only its Stop makes the agent ready again."""
    async with claude_with_agentcomms(temporal_env.client, tmp_path, tmux, posted=True) as (
        stack,
        claude,
        agent_id,
    ):
        settings = json.loads((claude.home / ".claude" / "settings.json").read_text())
        assert settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["type"] == "http"
        claude.model.on("say hello", bash("echo posted"), text("Hello posted."))
        result = await stack.call(
            "send", agent_id=agent_id, message="say hello", wait=True, timeout=60
        )
        assert (result["status"], result["delivered"]) == ("submitted", True)
        await claude.wait_for_screen("Hello posted.")
        await eventually(lambda: state_is(stack, agent_id, "ready"), timeout=30)
