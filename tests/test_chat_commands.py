"""Agents from a chat: the rules of `/new` (a folder under the roots once symlinks and `..`
are resolved, a kind and never a command) as units, then one stack where Alice starts a
process agent from Telegram (the scripted ACP agent, a real process), lists, talks to,
peeks at, interrupts, clears (a new session) and stops it, peeks at a real tmux pane, and a
stranger's `/new` starts nothing, nor does their `/clear`."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError
from temporalio.testing import WorkflowEnvironment

from agentcomms.agents.install import Target
from agentcomms.agents.install_agents import plan
from agentcomms.config import Config
from agentcomms.models import Agent
from gateway.agents.starting import under_roots
from gateway.chat.commands import Command, parse
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.support import acp_agent
from tests.support.acp_agent import log_of
from tests.support.agents import PROMPT_HINT, agent_binary, claude_env, prepare_claude_home
from tests.support.chat import CHAT, connected, with_telegram
from tests.support.cli import AGENTCOMMS, cli, cli_home
from tests.support.home import write_config
from tests.support.stack import Stack, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually

SCRIPTED = [sys.executable, acp_agent.__file__]
STRANGER = 999


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/new api /src/api", Command("new", ["api", "/src/api"])),
        ("/new@my_bot api /src/api gemini", Command("new", ["api", "/src/api", "gemini"])),
        ("/AGENTS", Command("agents", [])),
        ("  /peek  api ", Command("peek", ["api"])),
        ("/esc api", Command("esc", ["api"])),
        ("/stop api", Command("stop", ["api"])),
        ("/clear api", Command("clear", ["api"])),
        ("/etc/hosts looks odd", None),  # a message about a path, passed on to the agent
        ("/clearly not", None),
        ("please /stop api", None),
        ("", None),
    ],
)
def test_a_command_is_read_only_from_the_start_of_a_message(
    text: str, expected: Command | None
) -> None:
    assert parse(text) == expected


def test_a_folder_counts_only_once_resolved_under_a_root(tmp_path: Path) -> None:
    root = (tmp_path / "src").resolve()
    (root / "api").mkdir(parents=True)
    outside = tmp_path / "secrets"
    outside.mkdir()
    (root / "escape").symlink_to(outside)
    assert under_roots(str(root / "api"), [root]) == root / "api"
    assert under_roots(str(root), [root]) == root
    for sneaky in (root / "api" / ".." / ".." / "secrets", root / "escape", outside, Path("/")):
        with pytest.raises(ValueError, match=f"those are: {root}"):
            under_roots(str(sneaky), [root])
    with pytest.raises(ValueError, match="whole path"):
        under_roots("api", [root])
    with pytest.raises(ValueError, match=r"acp\.roots"):
        under_roots(str(root / "api"), [])  # none set: /new is refused, saying how to set them


def test_the_roots_and_kinds_are_read_under_agents_start_or_acp() -> None:
    cfg = Config.model_validate(
        {"agents": {"start": {"roots": ["/srv"], "kinds": {"goose": ["goose", "acp"]}}}}
    )
    assert cfg.acp.roots == [Path("/srv")] and cfg.acp.kinds == {"goose": ["goose", "acp"]}
    assert "start" not in cfg.agents
    for bad, says in [
        ({"agents": {"start": {"target": "s:0.0"}}}, "no agent may be named start"),
        ({"acp": {"roots": ["src"]}}, "not an absolute path"),
        ({"acp": {"kinds": {"Go Ose": ["goose"]}}}, "pattern"),
        ({"acp": {"kinds": {"goose": []}}}, "at least 1"),
        (
            {"acp": {"roots": ["/a"]}, "agents": {"start": {"roots": ["/b"]}}},
            "both set",
        ),
    ]:
        with pytest.raises(ValidationError, match=says):
            Config.model_validate(bad)


# ---- one stack: Alice's Telegram, the scripted ACP agent as the operator's kind "scripted" ----


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("roots").resolve()


@pytest.fixture(scope="module")
def windows(tmux_socket_dir: Path) -> Iterator[Tmux]:
    """The tmux server where `/new … --tmux` opens windows; started by the test that uses it."""
    server = Tmux(tmux_socket_dir / f"windows-{uuid.uuid4().hex[:8]}")
    yield server
    server.run("kill-server", check=False)


@pytest.fixture(scope="module")
async def telegram() -> AsyncIterator[FakeTelegram]:
    fake = FakeTelegram()
    fake.known_chats.add(CHAT)
    async with fake.server:
        yield fake


@pytest.fixture(scope="module")
async def stack(
    temporal_env: WorkflowEnvironment,
    tmp_path_factory: pytest.TempPathFactory,
    telegram: FakeTelegram,
    roots: Path,
    windows: Tmux,
) -> AsyncIterator[Stack]:
    chat = with_telegram(telegram, "chat-home")

    def configure(cfg: Config) -> Config:
        acp = cfg.acp.model_copy(
            update={
                "roots": [roots],
                "kinds": {"scripted": SCRIPTED},
                "tmux_socket": windows.socket,
                "tmux_session": "agents",
            }
        )
        return chat(cfg).model_copy(update={"acp": acp})

    async with running_stack(
        temporal_env.client, tmp_path_factory.mktemp("stack"), configure=configure
    ) as s:
        await connected(s, "telegram")
        yield s


async def answer(telegram: FakeTelegram, text: str, *, user_id: int | None = None) -> str:
    """What the bot answers `text` with, in the chat it was written in."""
    chat = user_id or CHAT
    before = len(telegram.texts_to(chat))
    telegram.human_says(chat, text, user_id=user_id)
    texts = await eventually(lambda: telegram.texts_to(chat)[before:] or None, timeout=30)
    return texts[0]


async def registered_pane(stack: Stack, agent: str, target: str) -> Agent | None:
    row = await stack.store.get_agent(agent)
    return row if row is not None and row.target == target else None


async def state_is(stack: Stack, agent: str, state: str) -> Agent | None:
    row = await stack.store.get_agent(agent)
    return row if row is not None and row.state == state else None


async def test_alice_starts_talks_to_peeks_at_interrupts_and_stops_an_agent_from_her_chat(
    stack: Stack, telegram: FakeTelegram, roots: Path
) -> None:
    agent = stack.agent_id("chat-new")
    folder = roots / "api"
    folder.mkdir()
    told = await answer(telegram, f"/new {agent} {roots}/other/../api scripted")
    assert told.startswith(f"started {agent} (scripted) in {folder}"), told
    row = await eventually(lambda: state_is(stack, agent, "ready"), timeout=30)
    assert row.type == "process" and row.target is not None and acp_agent.__file__ in row.target
    assert f"{agent}: ready (process)" in (await answer(telegram, "/agents")).splitlines()
    again = await answer(telegram, f"/new {agent} {roots} scripted")
    assert again == f"{agent} is already an agent: choose another id (/agents lists them)."

    assert (await answer(telegram, f"/peek {agent}")).startswith(
        f"{agent} (ready) has not finished a turn"
    )
    telegram.human_says(CHAT, f"@{agent} acp:say Four\u202e files.")
    await eventually(lambda: [t for t in telegram.texts_to(CHAT) if "Four" in t] or None)
    await eventually(lambda: state_is(stack, agent, "ready"))
    peeked = await answer(telegram, f"/peek {agent}")
    # Shown as approvals show text: the reversing mark is named, nothing of it deleted.
    assert peeked.startswith(f"{agent} (ready), its last reply:\nFour"), peeked
    assert "\u202e" not in peeked and "files." in peeked

    telegram.human_says(CHAT, f"@{agent} acp:hang")
    await eventually(lambda: state_is(stack, agent, "busy"))
    assert await answer(telegram, f"/esc {agent}") == f"interrupting {agent}."
    await eventually(lambda: [e for e in log_of(folder) if "cancel" in e] or None, timeout=30)

    await eventually(lambda: state_is(stack, agent, "ready"))
    [first] = sessions(folder)
    told = await answer(telegram, f"/clear {agent}")
    assert told.startswith(f"{agent} starts a new session; its old one is left"), told
    [_, second] = await eventually(lambda: sessions(folder)[1:] and sessions(folder), timeout=30)
    await eventually(lambda: state_is(stack, agent, "ready"))
    telegram.human_says(CHAT, f"@{agent} after the clear")
    prompted = await eventually(
        lambda: [e for e in log_of(folder) if "after the clear" in e.get("prompt", "")]
    )
    assert prompted[0]["session"] == second != first
    assert (folder / ".acp-agent-sessions" / f"{first}.json").exists()  # the old one is left

    assert (await answer(telegram, f"/stop {agent}")).startswith(f"stopped {agent};")
    await eventually(lambda: state_is(stack, agent, "offline"), timeout=30)


def sessions(folder: Path) -> list[str]:
    """The sessions the scripted agent opened in `folder`, in order."""
    return [e["new_session"] for e in log_of(folder) if "new_session" in e]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ("{agent} /etc", "not under a folder open to agents; those are: {roots}"),
        ("{agent} {roots}/missing", "is not a folder"),
        (
            "{agent} {roots} python3",
            "no kind 'python3'; a chat may start: gemini, claude-code, codex, scripted",
        ),
        ("{agent} {roots} scripted extra", "usage: /new ID DIR [KIND]"),
        ("{agent} {roots} scripted --tmux", "--tmux opens claude-code, codex, gemini in a pane"),
        ("{agent} {roots}/missing claude-code --tmux", "is not a folder on this host"),
        ("../x {roots} scripted", "agent id '../x' is not valid"),
    ],
)
async def test_a_new_agent_the_rules_refuse_is_not_started_and_the_chat_is_told_why(
    stack: Stack, telegram: FakeTelegram, roots: Path, args: str, says: str
) -> None:
    agent = stack.agent_id("refused")
    told = await answer(telegram, "/new " + args.format(agent=agent, roots=roots))
    assert says.format(roots=roots) in told, told
    assert await stack.store.get_agent(agent) is None


async def test_a_strangers_command_is_refused_like_any_of_their_messages(
    stack: Stack, telegram: FakeTelegram, roots: Path
) -> None:
    agent = stack.agent_id("stranger")
    told = await answer(telegram, f"/new {agent} {roots} scripted", user_id=STRANGER)
    assert "agentcomms pair" in told  # the pairing answer, no bypass
    assert await stack.store.get_agent(agent) is None
    known = stack.agent_id("known")
    await stack.call("start_agent", agent_id=known, dir=str(roots), command=SCRIPTED)
    await eventually(lambda: state_is(stack, known, "ready"), timeout=30)
    told = await answer(telegram, f"/clear {known}", user_id=STRANGER - 1)  # answered once each
    assert "agentcomms pair" in told
    # Had it cleared, the interrupt posted before that answer would come before this message.
    await stack.call("send", agent_id=known, message="still the same?", wait=True, timeout=30)
    [prompted] = await eventually(lambda: [e for e in log_of(roots) if "prompt" in e])
    assert [prompted["session"]] == sessions(roots)
    await stack.call("stop_agent", agent_id=known)


async def test_a_panes_screen_is_peeked_and_a_pane_agent_is_not_stopped_from_a_chat(
    stack: Stack, telegram: FakeTelegram, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id("pane")
    target = tmux.new_session(
        "peek", "sh -c 'printf \"hello from the pane\\033[31m red\\n\"; sleep 60'"
    )
    await eventually(lambda: "hello from the pane" in tmux.capture(target) or None)
    await stack.call("register", agent_id=agent, target=target, socket=tmux.socket)
    await eventually(lambda: stack.store.get_agent(agent))
    peeked = await answer(telegram, f"/peek {agent}")
    assert peeked.startswith(f"{agent} (") and f"pane {target}:\nhello from the pane red" in peeked
    assert "runs in a tmux pane" in await answer(telegram, f"/stop {agent}")
    assert "runs in a tmux pane" in await answer(telegram, f"/clear {agent}")
    taken = await answer(telegram, f"/new {agent} {tmp_path} scripted")
    assert taken.startswith(f"{agent} is already an agent")  # a pane is never taken over
    # The same look from the terminal.
    home = cli_home(tmp_path, stack)
    looked = await cli(home, "agents", "peek", agent)
    assert looked.returncode == 0 and "hello from the pane red" in looked.stdout, looked.stderr
    missing = await cli(home, "agents", "peek", "nobody-here")
    assert missing.returncode == 1 and "no agent 'nobody-here'" in missing.stderr
    assert "no agent 'nobody-here'" in await answer(telegram, "/peek nobody-here")


async def test_the_cli_starts_a_kind_the_operator_named_and_lists_the_kinds_it_knows(
    stack: Stack, tmp_path: Path
) -> None:
    home = tmp_path / "cli-home"
    socket = str(stack.cfg.server.socket())
    kinds = {"scripted": SCRIPTED}
    write_config(home, {"server": {"socket_path": socket}, "agents": {"start": {"kinds": kinds}}})
    agent = stack.agent_id("cli-kind")
    begun = await cli(home, "agents", "start", agent, "--dir", str(tmp_path), "--kind", "scripted")
    assert begun.returncode == 0, begun.stderr
    await eventually(lambda: state_is(stack, agent, "ready"), timeout=30)
    refused = await cli(home, "agents", "start", agent, "--dir", str(tmp_path), "--kind", "emacs")
    assert refused.returncode == 1
    assert "unknown kind 'emacs'; known: gemini, claude-code, codex, scripted" in refused.stderr
    await cli(home, "agents", "stop", agent)


async def test_new_with_tmux_opens_claude_code_in_a_window_with_its_hooks_and_registers_it(
    stack: Stack, telegram: FakeTelegram, roots: Path, windows: Tmux
) -> None:
    agent = stack.agent_id("window")
    folder, home = roots / "window", roots.parent / f"{agent}-home"
    model = FakeAnthropic()
    claude = await agent_binary("claude")
    prepare_claude_home(home, folder)
    plan(Target("claude-code", home=home, project=folder, argv=(AGENTCOMMS,))).apply()
    # The server's environment is what its windows get: Claude's HOME and model, our socket.
    env = claude_env(home, model, {"AGENTCOMMS_SOCKET": str(stack.cfg.server.socket())})
    env["PATH"] = f"{claude.parent}:{env['PATH']}"
    await asyncio.to_thread(
        subprocess.run,
        ["tmux", "-S", windows.socket, "new-session", "-d", "-s", "other", "sh"],
        env=env,
        check=True,
    )
    async with model.server:
        told = await answer(telegram, f"/new {agent} {folder} claude-code --tmux")
        assert told.startswith(f"started {agent} (claude-code) in {folder}, in tmux window agents:")
        target = told.split("tmux window ")[1].split(" ")[0]
        # Its hooks may speak before the registration's row is written: wait for the pane.
        row = await eventually(lambda: registered_pane(stack, agent, target))
        assert row.type == "tmux" and row.interrupt_key == "Escape"
        await eventually(lambda: PROMPT_HINT in windows.capture(target) or None, timeout=60)
        telegram.human_says(CHAT, f"@{agent} hello from the phone")
        await eventually(
            lambda: [r for r in model.requests if "hello from the phone" in json.dumps(r)] or None,
            timeout=60,
        )
        # Its hooks report as the agent the chat named: the pane is the agent's.
        await eventually(lambda: state_is(stack, agent, "ready"), timeout=60)
