"""The agent commands as a person types them, against a real in-process gateway and worker."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from agentcomms.cli import agents_cmd
from agentcomms.config import AgentConfig
from agentcomms.ids import new_event_id
from agentcomms.workflow_ids import mailbox_id
from tests.support.cli import AGENTCOMMS, cli, cli_home
from tests.support.stack import Stack, running_stack
from tests.support.tmux import Tmux, as_sent, recorder
from tests.support.waiting import eventually, typed


async def register_recorder_cli(
    home: Path, tmux: Tmux, tmp_path: Path, agent: str, *options: str
) -> tuple[Path, str]:
    """Register a recording pane for `agent` with the CLI; its file, and what the CLI printed."""
    target, out = recorder(tmux, tmp_path, "rec")
    registered = await cli(
        home, "agents", "register", agent, "--tmux", target, "--socket", tmux.socket,
        "--submit-delay-ms", "0", *options,
    )  # fmt: skip
    assert registered.returncode == 0, registered.stderr
    return out, registered.stdout


async def test_send_reads_a_piped_message(stack: Stack, tmux: Tmux, tmp_path: Path) -> None:
    home = cli_home(tmp_path, stack)
    agent = stack.agent_id("piped")
    out, _ = await register_recorder_cli(home, tmux, tmp_path, agent)
    sent = await cli(home, "send", agent, "--wait", stdin='diff --git a/x\n+ "$y"\n')
    assert sent.returncode == 0 and "delivered" in sent.stdout, sent.stderr
    # Pasted with its newline kept; the one trailing newline from the pipe is not a second Enter.
    await typed(out, as_sent('diff --git a/x\n+ "$y"'))
    empty = await cli(home, "send", agent, stdin="\n")
    assert empty.returncode == 1 and "message on stdin is empty" in empty.stderr


async def test_register_send_events_interrupt_inbox(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    home = cli_home(tmp_path, stack)
    agent = stack.agent_id("backend")
    out, printed = await register_recorder_cli(
        home, tmux, tmp_path, agent, "--interrupt-key", "Escape"
    )
    assert f"registered {agent}" in printed

    # `--` lets a message start with a dash, as with any command-line tool.
    retry_id = new_event_id()
    for _ in range(2):  # a script retrying with the same --event-id
        sent = await cli(
            home, "send", agent, "--wait", "--json", "--event-id", retry_id, "--", "-rf; C-c Enter"
        )
        assert sent.returncode == 0, sent.stderr
    result = json.loads(sent.stdout)
    assert result["delivered"] is True and result["event_id"] == retry_id
    await typed(out, as_sent("-rf; C-c Enter"))

    interrupted = await cli(home, "interrupt", agent, "-r", "wrong branch", "--wait")
    assert interrupted.returncode == 0 and "delivered" in interrupted.stdout
    await typed(out, as_sent("-rf; C-c Enter") + b"\x1b")

    events = await cli(home, "events", agent, "--json")
    lines = json.loads(events.stdout)["events"]  # one document, as `json.load` reads it
    assert [(e["type"], e["status"]) for e in lines] == [
        ("human_message", "delivered"),
        ("interrupt", "delivered"),
    ]
    assert lines[0]["id"] == result["event_id"]
    assert lines[1]["payload"]["reason"] == "wrong branch"

    table = await cli(home, "agents")
    assert agent in table.stdout and "online" in table.stdout

    await cli(home, "reply", "cli:local", "all green", "-a", agent)
    inbox = await cli(home, "inbox")
    assert f"{agent}: all green" in inbox.stdout


async def test_agents_all_lists_offline_agents_with_their_queue(
    stack: Stack, tmp_path: Path
) -> None:
    home = cli_home(tmp_path, stack)
    agent = stack.agent_id("offline")
    await cli(home, "send", agent, "hello?")
    await cli(home, "send", agent, "anyone?")
    listed = await eventually(lambda: _listed(home, agent))
    assert listed["status"] == "offline" and listed["pending"] == 2
    online_only = await cli(home, "agents", "--json")
    assert agent not in online_only.stdout


async def _listed(home: Path, agent: str) -> dict[str, Any] | None:
    result = json.loads((await cli(home, "agents", "--all", "--json")).stdout)
    rows = [a for a in result["agents"] if a["id"] == agent and a["pending"] == 2]
    return rows[0] if rows else None


async def test_mistakes_are_one_line_errors(stack: Stack, tmp_path: Path) -> None:
    home = cli_home(tmp_path, stack)
    bad = await cli(home, "events", "no-such-agent")
    assert bad.returncode == 1 and "unknown agent 'no-such-agent'" in bad.stderr
    assert "Traceback" not in bad.stderr
    hostile = await cli(home, "send", "../../etc", "x")
    assert hostile.returncode == 1 and "agent_id" in hostile.stderr


async def test_agents_in_the_config_are_registered_at_start(
    temporal_env: WorkflowEnvironment, tmux: Tmux, tmp_path: Path
) -> None:
    target, out = recorder(tmux, tmp_path, "configured")
    agent = f"configured-{os.getpid()}"
    async with running_stack(temporal_env.client, tmp_path) as stack:
        stack.cfg.agents[agent] = AgentConfig(target=target, socket=tmux.socket, submit_delay_ms=0)
        await stack.gateway.register_configured_agents()
        result = await stack.call("send", agent_id=agent, message="from config", wait=True)
        assert result["delivered"] and out.read_bytes() == as_sent("from config")
        handle = stack.client.get_workflow_handle(mailbox_id(agent))
        description = await handle.describe()
        assert description.status == WorkflowExecutionStatus.RUNNING
        # The Temporal UI can find and read the mailbox without decoding payloads.
        attrs = {pair.key.name: pair.value for pair in description.typed_search_attributes}
        assert attrs["AgentId"] == agent and attrs["AgentStatus"] == "online"
        await handle.terminate("test over")


async def test_events_follow_prints_new_events_as_they_come(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    home = cli_home(tmp_path, stack)
    agent = stack.agent_id()
    target, _ = recorder(tmux, tmp_path, "rec")
    await stack.call(
        "register", agent_id=agent, target=target, socket=tmux.socket, submit_delay_ms=0
    )
    first = await stack.call("send", agent_id=agent, message="before", wait=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCOMMS_")}
    env["AGENTCOMMS_HOME"] = str(home)
    follow = await asyncio.create_subprocess_exec(
        AGENTCOMMS,
        "events",
        agent,
        "--follow",
        "--since",
        first["event_id"],
        "--json",
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        later = await stack.call("send", agent_id=agent, message="after", wait=True)
        assert follow.stdout is not None
        seen: list[dict[str, Any]] = []  # one event per line, each line a JSON object
        while later["event_id"] not in [e["id"] for e in seen]:
            line = await asyncio.wait_for(follow.stdout.readline(), timeout=15)
            seen.append(json.loads(line))
        assert first["event_id"] not in [e["id"] for e in seen]  # --since means after
    finally:
        follow.kill()
        await follow.wait()


async def test_register_refuses_a_pane_that_does_not_exist_unless_allowed(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    home = cli_home(tmp_path, stack)
    agent = stack.agent_id("early")
    early = await cli(
        home, "agents", "register", agent, "--tmux", "later:0.0", "--socket", tmux.socket
    )
    assert early.returncode == 1, early.stdout
    assert early.stderr.startswith(f"error: nothing registered: the tmux server at {tmux.socket}")
    assert "--allow-missing registers it anyway" in early.stderr
    assert not await _has_pane(stack, agent)
    allowed = await cli(
        home, "agents", "register", agent, "--tmux", "later:0.0", "--socket", tmux.socket,
        "--allow-missing",
    )  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr
    assert f"note: error connecting to {tmux.socket}" in allowed.stdout  # no server there yet
    assert "messages wait until the pane exists" in allowed.stdout
    target = tmux.new_session("later")
    wrong = await cli(
        home, "agents", "register", agent, "--tmux", "other:0.0", "--socket", tmux.socket
    )
    assert wrong.returncode == 1 and "has no pane other:0.0 (" in wrong.stderr, wrong.stderr
    # Outside tmux and without --socket, the pane of a private server (`tmux -L NAME`) is
    # looked for on the default one: the error says how to name the right server.
    unnamed = await cli(home, "agents", "register", agent, "--tmux", target)
    assert unnamed.returncode == 1
    assert "(a pane of another tmux server: name it with --socket)" in unnamed.stderr
    again = await cli(home, "agents", "register", agent, "--tmux", target, "--socket", tmux.socket)
    assert again.returncode == 0 and "note:" not in again.stdout, again.stdout


async def test_register_takes_a_tmux_server_by_its_l_name(stack: Stack, tmp_path: Path) -> None:
    """`--socket NAME` is the server `tmux -L NAME` starts, in tmux's own socket folder."""
    home = cli_home(tmp_path, stack)
    agent = stack.agent_id("named")
    name = f"ac-{agent}"
    # The CLI runs without the test's TMUX* variables: tmux's own default folder.
    socket = Path("/tmp") / f"tmux-{os.getuid()}" / name
    socket.parent.mkdir(mode=0o700, exist_ok=True)
    missing = await cli(home, "agents", "register", agent, "--tmux", "s:0.0", "--socket", name)
    assert missing.returncode == 1
    assert f"the tmux server {name!r} (`tmux -L {name}`, socket {socket}) has no pane" in (
        missing.stderr
    )
    named = Tmux(socket)
    named.new_session("s")
    try:
        done = await cli(home, "agents", "register", agent, "--tmux", "s:0.0", "--socket", name)
        assert done.returncode == 0, done.stderr
        assert f"(tmux server {socket})" in done.stdout
        await eventually(lambda: _has_pane(stack, agent))
    finally:
        named.run("kill-server", check=False)


async def _has_pane(stack: Stack, agent: str) -> bool:
    listed = await stack.call("agents")
    return any(a["id"] == agent and a["target"] for a in listed["agents"])


async def test_send_to_an_agent_without_a_pane_says_why_it_waits(
    stack: Stack, tmp_path: Path
) -> None:
    home = cli_home(tmp_path, stack)
    typo = stack.agent_id("backnd")
    sent = await cli(home, "send", typo, "hello")
    assert sent.returncode == 0 and "queued" in sent.stdout, sent.stderr
    assert f"no pane is registered for '{typo}'" in sent.stdout
    assert f"agentcomms agents register {typo} --tmux" in sent.stdout
    scripted = await cli(home, "send", typo, "hello", "--json")
    assert json.loads(scripted.stdout)["status"] == "queued"  # JSON stays pure
    # An interrupt does not wait like a message: later, it would stop whatever comes next.
    stop = await cli(home, "interrupt", typo)
    assert stop.returncode == 0 and "queued" in stop.stdout, stop.stderr
    assert "pressed only if that changes within 60 s, never later" in stop.stdout, stop.stdout


async def test_register_inside_tmux_pins_that_server_for_the_worker(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    # A shell inside `tmux -L work` names panes of that server; the worker, started elsewhere,
    # would look for them on the default server unless registration records which one.
    home = cli_home(tmp_path, stack)
    agent = stack.agent_id("inside")
    target, out = recorder(tmux, tmp_path, "rec")
    registered = await cli(
        home, "agents", "register", agent, "--tmux", target, "--submit-delay-ms", "0",
        inside_tmux=tmux,
    )  # fmt: skip
    assert registered.returncode == 0, registered.stderr
    assert f"(tmux server {tmux.socket})" in registered.stdout
    sent = await cli(home, "send", agent, "found you", "--wait")
    assert "delivered" in sent.stdout, sent.stdout + sent.stderr
    await typed(out, as_sent("found you"))


async def test_text_from_outside_prints_as_itself_and_never_as_terminal_codes(
    stack: Stack, tmp_path: Path
) -> None:
    home = cli_home(tmp_path, stack)
    agent = stack.agent_id("loud")
    # Rich markup and a terminal escape (set the window title) in both directions.
    hostile = "see [/] and [red]x[/red] \x1b]0;owned\x07done"
    assert (await cli(home, "send", agent, hostile)).returncode == 0
    assert (await cli(home, "reply", "cli:local", hostile, "-a", agent)).returncode == 0
    events = await cli(home, "events", agent)
    inbox = await cli(home, "inbox")
    for shown in (events, inbox):
        assert shown.returncode == 0, shown.stderr
        assert "see [/] and [red]x[/red] done" in shown.stdout
        assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    refused = await cli(home, "send", "[/]", "hi")  # the error names the bad id, as it is
    assert refused.returncode == 1 and "agent id '[/]' is not valid" in refused.stderr


async def test_inbox_counts_agent_messages_and_follows_new_ones(
    stack: Stack, tmp_path: Path
) -> None:
    home = cli_home(tmp_path, stack)
    agent = stack.agent_id("asker")
    for i in range(3):  # the human's messages share the channel; -n counts the agent's only
        await stack.call("reply", channel_id="cli:local", message=f"question {i}", agent_id=agent)
        await stack.call("send", agent_id=agent, message=f"answer {i}")
    latest = await cli(home, "inbox", "-n", "2", "--json")
    texts = [m["payload"]["text"] for m in json.loads(latest.stdout)["messages"]]
    assert texts[-2:] == ["question 1", "question 2"] and len(texts) == 2

    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCOMMS_")}
    following = await asyncio.create_subprocess_exec(
        AGENTCOMMS, "inbox", "--follow", "-n", "1",
        env={**env, "AGENTCOMMS_HOME": str(home), "COLUMNS": "200"},
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert following.stdout is not None
    try:
        first = await asyncio.wait_for(following.stdout.readline(), 30)
        assert first.decode().rstrip().endswith(f"{agent}: question 2")
        await stack.call("reply", channel_id="cli:local", message="are you there?", agent_id=agent)
        later = await asyncio.wait_for(following.stdout.readline(), 30)
        assert later.decode().rstrip().endswith(f"{agent}: are you there?")
    finally:
        following.terminate()
        await following.wait()
    # For a script: one message per line, each line a JSON object.
    as_json = await asyncio.create_subprocess_exec(
        AGENTCOMMS, "inbox", "--follow", "-n", "1", "--json",
        env={**env, "AGENTCOMMS_HOME": str(home)}, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert as_json.stdout is not None
    try:
        line = await asyncio.wait_for(as_json.stdout.readline(), 30)
        assert json.loads(line)["payload"]["text"] == "are you there?"
    finally:
        as_json.terminate()
        await as_json.wait()


async def test_send_help_tells_a_shell_user_how_to_make_an_event_id(
    stack: Stack, tmp_path: Path
) -> None:
    """The help's recipes, run in a shell, make ids `send` takes (no Python function to call)."""
    home = cli_home(tmp_path, stack)
    agent = stack.agent_id("ids")
    helped = " ".join((await cli(home, "send", "--help")).stdout.split())  # as one line
    assert "agentcomms.ids" not in helped
    recipes = re.findall(r"`id=(.+?)`", agents_cmd.send.__doc__ or "")
    assert len(recipes) == 2 and all(f"id={r}" in helped for r in recipes), (recipes, helped)
    # python-ulid's `ulid` is installed beside `agentcomms`.
    path = f"{Path(AGENTCOMMS).parent}:{os.environ['PATH']}"
    for recipe in recipes:
        made = await asyncio.create_subprocess_exec(
            "bash", "-c", f"echo {recipe}", env={"PATH": path}, stdout=asyncio.subprocess.PIPE
        )
        event_id = (await made.communicate())[0].decode().strip()
        for _ in range(2):  # a script's retry
            sent = await cli(home, "send", agent, "hi", "--json", "--event-id", event_id)
            assert sent.returncode == 0, (recipe, event_id, sent.stderr)
            assert json.loads(sent.stdout)["event_id"] == event_id
    # Any other string is refused, with where to look.
    refused = await cli(home, "send", agent, "hi", "--event-id", "retry-1")
    assert refused.returncode == 1 and "send --help" in refused.stderr, refused.stderr
