"""The real agent CLIs in tmux panes, their models replaced by the scripted fakes in ``tests/fakes``.

Claude Code runs from npm (pinned below), installed into ``~/.cache/agentcomms-agents`` when it
is missing there. Each Claude gets a private ``HOME`` prepared so that it starts straight at its
prompt, unattended: onboarding done, the project trusted, the API key approved, manual permission
mode (tools ask "Do you want to proceed?"), and, unless a test asks for it, the first-start
dialog "Make auto mode your default permission mode?" already seen. Its model is a
``FakeAnthropic`` behind ``ANTHROPIC_BASE_URL``; telemetry, error reports and updates are off.

Codex (pinned too) gets a HOME whose config.toml makes a ``FakeResponses`` its model provider and
trusts the project; it starts at its prompt (``start_codex``).

Gemini CLI (pinned too) gets a HOME whose settings.json chooses API-key login and turns off
folder trust, updates, usage statistics and telemetry; its model is a ``FakeGemini`` behind
``GOOGLE_GEMINI_BASE_URL`` (``start_gemini``).

Starting Claude takes seconds, so a module may share one (``module_claude``); its fake keeps the
rules of every test in the module, so each test scripts its own words. With agentcomms' hooks
installed and reporting to a stack: ``claude_with_agentcomms``, ``codex_with_agentcomms``, and,
with the human's terminal beside it, ``attended`` (``attended_claude``, one per module).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from agentcomms.acp.kinds import KINDS
from agentcomms.agents.install import Target
from agentcomms.agents.install_agents import plan
from agentcomms.config import Config
from agentcomms.models import PaneTarget
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai_responses import FakeResponses
from tests.support.stack import Stack, register, running_stack
from tests.support.tmux import Terminal, Tmux
from tests.support.waiting import eventually

CLAUDE_CODE_VERSION = "2.1.337"
CODEX_VERSION = "0.171.0"
GEMINI_VERSION = "0.61.0"
# Where `.ci/run` and the fixtures install the agents (one npm prefix for both).
AGENTS_PREFIX = Path.home() / ".cache" / "agentcomms-agents"
_PACKAGES = {
    "claude": f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}",
    "codex": f"@openai/codex@{CODEX_VERSION}",
    "gemini": f"@google/gemini-cli@{GEMINI_VERSION}",
    # Claude Code's and Codex's ACP adapters, at the versions `--kind` pins.
    "claude-agent-acp": KINDS["claude-code"].package,
    "codex-acp": KINDS["codex"].package,
}
API_KEY = "sk-ant-test-agentcomms-0123456789abcdef"
# Claude Code's prompt line, under its input box, when nothing is open over it.
PROMPT_HINT = "? for shortcuts"
# What starts an input line: Claude Code's and Codex's prompt marks.
PROMPT_MARKS = ("\u276f", "\u203a")
AUTO_MODE_DIALOG = "Make auto mode your default permission mode?"
# Claude Code's status line in auto mode, its own default: at its prompt, in place of the hint.
AUTO_MODE_ON = "auto mode on"
PROCEED_DIALOG = "Do you want to proceed?"
# Claude Code's status line in plan mode.
PLAN_MODE = "plan mode on"
# Claude Code, under its input box, while a turn runs.
BUSY_HINT = "esc to interrupt"
# Codex, at start, when hooks are new or changed since the user last trusted them.
CODEX_HOOKS_REVIEW = "Hooks need review"
# Gemini CLI's empty input box, once it is at its prompt.
GEMINI_PROMPT_HINT = "Type your message"
# Gemini CLI's own permission dialog.
GEMINI_DIALOG = "Allow execution of"
GEMINI_API_KEY = "gemini-test-agentcomms-key"
# A model of Codex's own catalog, as a user's Codex runs one: Codex offers it its apply_patch edit
# tool, which it offers a model it does not know not at all (measured, 0.169); the notice marks
# the catalog's offer to move on to a newer model as seen, so Codex starts at its prompt.
CODEX_CATALOG_MODEL = {"model": "gpt-5.5", "notice": {"model_migrations": {"gpt-5.5": "gpt-6-sol"}}}
_install_lock = asyncio.Lock()


async def agent_binary(name: str) -> Path:
    """The agent's executable (`claude`, `codex`, `gemini`), installed from npm at its pinned version when
    missing, so the README's test command works on a fresh machine."""
    path = AGENTS_PREFIX / "node_modules" / ".bin" / name
    async with _install_lock:
        if not path.exists():
            npm = shutil.which("npm")
            if npm is None:
                pytest.fail(
                    f"{name} is not installed in {AGENTS_PREFIX} and npm is missing: "
                    "`apt-get install nodejs npm` (or run `.ci/run`, which installs both)"
                )
            done = await asyncio.to_thread(
                subprocess.run,
                [
                    npm,
                    "install",
                    "--no-fund",
                    "--no-audit",
                    "--prefix",
                    str(AGENTS_PREFIX),
                    _PACKAGES[name],
                ],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0 or not path.exists():
                pytest.fail(f"npm could not install {_PACKAGES[name]}: {done.stderr[-2000:]}")
    return path


def prepare_claude_home(
    home: Path,
    project: Path,
    *,
    skip_auto_dialog: bool = True,
    settings: Mapping[str, Any] | None = None,
    default_mode: str | None = "default",
) -> None:
    """A `HOME` in which Claude Code starts at its prompt in `project`, in manual mode (in
    `default_mode`; None writes none, and Claude Code starts in its own default, auto).

    `settings` are merged over the manual-mode settings (``~/.claude/settings.json``)."""
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    project.mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = {
        "hasCompletedOnboarding": True,
        "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
        "projects": {str(project): {"hasTrustDialogAccepted": True}},
    }
    if skip_auto_dialog:
        state |= {"hasSeenAutoDefaultNudge": True, "hasSeenAutoDefaultNotice": True}
    (home / ".claude.json").write_text(json.dumps(state, indent=2))
    mode = {"permissions": {"defaultMode": default_mode}} if default_mode else {}
    user_settings = {**mode, **(settings or {})}
    (home / ".claude" / "settings.json").write_text(json.dumps(user_settings, indent=2))


def claude_env(
    home: Path, model: FakeAnthropic, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """What Claude Code runs with: only these, so the test machine's own keys and settings
    cannot leak in (the pane adds TMUX and TMUX_PANE, which hooks read)."""
    return {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "ANTHROPIC_BASE_URL": model.base_url,
        "ANTHROPIC_API_KEY": API_KEY,
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        **(extra or {}),
    }


@dataclass
class AgentPane:
    """A real agent in a pane of a private tmux server (its HOME and project beside it)."""

    tmux: Tmux
    target: str
    home: Path
    project: Path
    # The human's terminal, attached once the test first types: see `keys`.
    terminal: Terminal | None = field(default=None, init=False, repr=False)

    @property
    def pane(self) -> PaneTarget:
        return PaneTarget(target=self.target, socket=self.tmux.socket)

    def screen(self) -> str:
        return self.tmux.capture(self.target)

    async def wait_for_screen(self, text: str, *, timeout: float = 30) -> str:
        """The screen, once it shows `text`; fails with the last screen otherwise."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            screen = await asyncio.to_thread(self.screen)
            if text in screen:
                return screen
            if loop.time() > deadline:
                raise AssertionError(f"{text!r} never showed in the pane; it shows:\n{screen}")
            await asyncio.sleep(0.1)

    async def wait_ready(self, *, timeout: float = 30) -> str:
        """The screen, once Claude is at its prompt with nothing open over it."""
        return await self.wait_for_screen(PROMPT_HINT, timeout=timeout)

    async def type(self, words: str, *, timeout: float = 30) -> None:
        """Type `words` as a person does, press Enter once they show in the input box (keys
        sent in one burst read as a paste, and the Enter would join the text), and press it
        again while they are still there: measured, an Enter right after the text can be lost."""
        await self.keys("-l", words)
        await self.wait_for_screen(words[-40:])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            await self.keys("Enter")
            for _ in range(10):
                await asyncio.sleep(0.1)
                if words[-40:] not in self.input_line(await asyncio.to_thread(self.screen)):
                    return
            if loop.time() > deadline:
                raise AssertionError(f"{words!r} never left the input box:\n{self.screen()}")

    @staticmethod
    def input_line(screen: str) -> str:
        """The agent's input box: the last line that starts with its prompt mark (both Claude
        Code and Codex show the prompts already sent above it with the same mark)."""
        marked = [line for line in screen.splitlines() if line.lstrip().startswith(PROMPT_MARKS)]
        return marked[-1] if marked else ""

    async def keys(self, *keys: str) -> None:
        """Press keys by tmux's names (`Enter`, `Escape`, `1`…; `-l` first: words as typed),
        as a person at a terminal attached to the agent's session does."""
        terminal = self.terminal
        if terminal is None or not await asyncio.to_thread(terminal.attached):
            if terminal is not None:  # its session ended (the agent restarted in a new one)
                await asyncio.to_thread(terminal.close)
            terminal = self.terminal = Terminal(self.tmux, self.target.split(":")[0])
            await eventually(lambda: asyncio.to_thread(terminal.attached), timeout=10)
        await asyncio.to_thread(terminal.keys, *keys)

    async def answer(self, dialog: str, *keys: str, timeout: float = 30) -> str:
        """Answer `dialog` with `keys` once it shows; the screen once it closed. Measured: an
        Enter pressed as the dialog appeared was lost, so the keys are pressed again, once a
        second, until the dialog is gone; and the agent's hook may open its approval before the
        agent draws the dialog, when keys would go to the input box instead."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        await self.wait_for_screen(dialog, timeout=timeout)
        while True:
            await self.keys(*keys)
            for _ in range(10):
                await asyncio.sleep(0.1)
                screen = await asyncio.to_thread(self.screen)
                if dialog not in screen:
                    return screen
            if loop.time() > deadline:
                raise AssertionError(f"{keys} never closed {dialog!r}; the pane shows:\n{screen}")


@dataclass
class ClaudePane(AgentPane):
    """The real Claude Code, and the fake model it talks to."""

    model: FakeAnthropic

    async def plan_mode(self, *, timeout: float = 30) -> None:
        """Switch Claude to plan mode as a person does: Shift+Tab until its status line says so
        (each press moves one mode on)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while PLAN_MODE not in await asyncio.to_thread(self.screen):
            if loop.time() > deadline:
                raise AssertionError(f"plan mode never came on:\n{self.screen()}")
            await self.keys("BTab")
            await asyncio.sleep(0.5)


@dataclass
class CodexPane(AgentPane):
    """The real Codex, and the fake model it talks to."""

    model: FakeResponses


async def _open_pane(
    tmux: Tmux, name: str, project: Path, variables: Mapping[str, str], argv: list[str]
) -> str:
    """Run `argv` with exactly `variables` (and the pane's TMUX, TMUX_PANE) in a new session's
    pane at `project`, a shell after it exits, as a person's terminal; the pane's target."""
    assigned = " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items())
    # `env -i` keeps the test machine's environment out; the pane's own TMUX and TMUX_PANE stay.
    command = f'env -i TMUX="$TMUX" TMUX_PANE="$TMUX_PANE" {assigned} {shlex.join(argv)}; exec sh'
    size = ("-x", "200", "-y", "50")
    await asyncio.to_thread(
        tmux.run, "new-session", "-d", "-s", name, *size, "-c", str(project), command
    )
    return f"{name}:0.0"


async def start_claude(
    tmux: Tmux,
    root: Path,
    model: FakeAnthropic,
    *,
    name: str = "claude",
    skip_auto_dialog: bool = True,
    settings: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    setup: Callable[[Path, Path], None] | None = None,
    default_mode: str | None = "default",
    until: str | None = None,
) -> ClaudePane:
    """Claude Code in session `name` of `tmux`, its HOME and project under `root`, returned at
    its prompt; or, with ``skip_auto_dialog=False``, showing the first-start auto-mode dialog
    (`until`: once the screen shows that instead). When Claude exits the pane keeps a shell, as
    a person's terminal does. `setup(home, project)` runs once both are prepared, before Claude
    starts and reads them. `default_mode`: see `prepare_claude_home`."""
    claude = await agent_binary("claude")
    home, project = root / "home", root / "project"
    prepare_claude_home(
        home,
        project,
        skip_auto_dialog=skip_auto_dialog,
        settings=settings,
        default_mode=default_mode,
    )
    if setup is not None:
        setup(home, project)
    target = await _open_pane(tmux, name, project, claude_env(home, model, env), [str(claude)])
    pane = ClaudePane(tmux, target, home, project, model)
    shown = until or (PROMPT_HINT if skip_auto_dialog else AUTO_MODE_DIALOG)
    await pane.wait_for_screen(shown, timeout=60)
    return pane


@asynccontextmanager
async def claude_with_agentcomms(
    client: Client,
    root: Path,
    tmux: Tmux,
    *,
    agent_id: str | None = None,
    configure: Callable[[Config], Config] | None = None,
    never: tuple[str, ...] = (),
    posted: bool = False,
    default_mode: str | None = "default",
) -> AsyncIterator[tuple[Stack, ClaudePane, str]]:
    """A stack (`configure` adjusts its configuration), and the real Claude Code with
    `agentcomms install claude-code` in its home and its pane registered as an agent
    (`agent_id`, or one made up; the id given): its hooks report to that stack. `never`: the
    never-list installed with them. `posted`: the reporting hooks post to the gateway's hook
    door (its token in the agentcomms home, which the caller makes private). `default_mode`:
    see `prepare_claude_home` (None: Claude Code's own default, auto mode)."""
    from agentcomms.agents.install import hook_url
    from agentcomms.hook_token import hook_token
    from tests.support.cli import AGENTCOMMS  # cli imports the stack, as this module does

    model = FakeAnthropic()
    with_door = _with_door(configure, posted)
    async with running_stack(client, root / "stack", configure=with_door) as stack, model.server:
        door = stack.gateway.hook_reports

        def install(home: Path, project: Path) -> None:
            target = Target("claude-code", home=home, project=project, argv=(AGENTCOMMS,))
            if door is not None:
                url = hook_url(door.server.port, "claude-code")
                target = replace(target, hook_url=url, hook_token=hook_token())
            plan(replace(target, never=never)).apply()

        try:
            claude = await start_claude(
                tmux,
                root / "claude",
                model,
                setup=install,
                env={"AGENTCOMMS_SOCKET": str(stack.cfg.server.socket())},
                default_mode=default_mode,
                until=PROMPT_HINT if default_mode else AUTO_MODE_ON,
            )
            agent_id = agent_id or f"claude-{uuid.uuid4().hex[:6]}"
            await register(stack, agent_id, tmux, claude.target, submit_delay_ms=300)
            # The gateway matches a hook to the pane the projection shows registered.
            await eventually(lambda: _registered(stack, agent_id))
            yield stack, claude, agent_id
        finally:
            tmux.run("kill-server", check=False)


def _with_door(
    configure: Callable[[Config], Config] | None, posted: bool
) -> Callable[[Config], Config]:
    """`configure`, and with `posted` the gateway's hook door on (a port chosen at start)."""

    def with_door(cfg: Config) -> Config:
        cfg = configure(cfg) if configure is not None else cfg
        if not posted:
            return cfg
        return cfg.model_copy(update={"server": cfg.server.model_copy(update={"hook_port": 0})})

    return with_door


async def _registered(stack: Stack, agent_id: str) -> bool:
    listed = await stack.call("agents")
    return any(a["id"] == agent_id and a["target"] is not None for a in listed["agents"])


@asynccontextmanager
async def codex_with_agentcomms(
    client: Client,
    root: Path,
    tmux: Tmux,
    *,
    configure: Callable[[Config], Config] | None = None,
    never: tuple[str, ...] = (),
    posted: bool = False,
) -> AsyncIterator[tuple[Stack, CodexPane, str]]:
    """A stack (`configure` adjusts its configuration), and the real Codex with `agentcomms
    install codex` in its home (its hooks trusted in Codex's own review, as a person does), on a
    model of its catalog (so it edits with apply_patch) in ``on-request`` approval mode, its pane
    registered as an agent (the id given): its hooks report to that stack. `never`: the
    never-list installed with them. `posted`: the reporting hooks post to the gateway's hook
    door from Codex's own shell (its token in the agentcomms home, which the caller makes
    private)."""
    from tests.support.cli import AGENTCOMMS  # cli imports the stack, as this module does

    model = FakeResponses()
    cfg_with = _with_door(configure, posted)
    async with running_stack(client, root / "stack", configure=cfg_with) as stack, model.server:
        door = stack.gateway.hook_reports

        def install(home: Path, project: Path) -> None:
            from agentcomms.agents.install import hook_url
            from agentcomms.hook_token import hook_token, token_path

            target = Target("codex", home=home, project=project, argv=(AGENTCOMMS,), never=never)
            if door is not None:
                hook_token()  # made at first use, as `install` makes it
                url = hook_url(door.server.port, "codex")
                target = replace(target, hook_url=url, hook_token_file=token_path())
            plan(target).apply()

        try:
            codex = await start_codex(
                tmux,
                root / "codex",
                model,
                setup=install,
                until=CODEX_HOOKS_REVIEW,
                settings={"approval_policy": "on-request", **CODEX_CATALOG_MODEL},
                env={"AGENTCOMMS_SOCKET": str(stack.cfg.server.socket())},
            )
            await codex.answer(CODEX_HOOKS_REVIEW, "2", "Enter")  # "Trust all and continue"
            await codex.wait_for_screen(PROMPT_HINT)
            agent_id = f"codex-{uuid.uuid4().hex[:6]}"
            await register(stack, agent_id, tmux, codex.target, submit_delay_ms=300)
            await eventually(lambda: _registered(stack, agent_id))
            yield stack, codex, agent_id
        finally:
            tmux.run("kill-server", check=False)


P = TypeVar("P", bound=AgentPane)


@dataclass
class Attended(Generic[P]):
    """A real agent whose hooks report to a stack, and its human at a terminal: the CLI's home,
    pointed at the stack's socket."""

    stack: Stack
    pane: P
    agent_id: str
    home: Path

    async def approval(self, ask: str | None = None) -> dict[str, Any] | None:
        """This agent's open approval (of kind `ask`: permission, question, plan), as
        `agentcomms approvals --json` lists it."""
        from tests.support.cli import cli

        done = await cli(self.home, "approvals", "--json")
        assert done.returncode == 0, done.stderr
        rows = json.loads(done.stdout)["approvals"]
        mine = (r for r in rows if r["agent_id"] == self.agent_id)
        return next((r for r in mine if ask is None or r["ask"] == ask), None)

    async def row(self) -> dict[str, Any]:
        """The agent as `agentcomms agents --json` shows it."""
        from tests.support.cli import cli

        done = await cli(self.home, "agents", "--json")
        assert done.returncode == 0, done.stderr
        return next(r for r in json.loads(done.stdout)["agents"] if r["id"] == self.agent_id)


@asynccontextmanager
async def attended(
    agent: Callable[..., Any],
    client: Client,
    socket_dir: Path,
    root: Path,
    *,
    configure: Callable[[Config], Config] | None = None,
    never: tuple[str, ...] = (),
    posted: bool = False,
) -> AsyncIterator[Attended[Any]]:
    """`agent` (:func:`claude_with_agentcomms`, :func:`codex_with_agentcomms`) started under
    `root` on a tmux server of its own, with its human's terminal; `configure` adjusts its
    stack's configuration; `posted`: its reporting hooks post to the gateway's hook door."""
    from tests.support.cli import cli_home

    server = Tmux(socket_dir / f"h-{uuid.uuid4().hex[:8]}")
    async with agent(client, root, server, configure=configure, never=never, posted=posted) as (
        stack,
        pane,
        agent_id,
    ):
        yield Attended(stack, pane, agent_id, cli_home(root, stack))


@pytest.fixture(scope="module")
async def attended_claude(
    agent_clis: dict[str, Path],
    temporal_env: WorkflowEnvironment,
    tmux_socket_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Attended[ClaudePane]]:
    """One real Claude Code for a module's tests, with agentcomms' hooks and its human at a
    terminal; its fake model keeps every test's rules, so each test scripts its own words."""
    root = tmp_path_factory.mktemp("attended-claude")
    async with attended(claude_with_agentcomms, temporal_env.client, tmux_socket_dir, root) as a:
        yield a


def prepare_codex_home(
    home: Path, project: Path, model: FakeResponses, settings: Mapping[str, Any] | None = None
) -> None:
    """A `HOME` in which Codex starts at its prompt in `project`, trusted, its model the fake
    (a provider of its own needs no login); `settings` are set over it (config.toml's keys)."""
    import tomlkit

    (home / ".codex").mkdir(parents=True, exist_ok=True)
    project.mkdir(parents=True, exist_ok=True)
    config = tomlkit.document()
    config["model"] = "gpt-test"
    config["model_provider"] = "scripted"
    config["tui"] = {"screen_reader_detection_done": True}
    config["model_providers"] = {
        "scripted": {
            "name": "scripted",
            "base_url": model.base_url,
            "env_key": "SCRIPTED_OPENAI_KEY",
            "wire_api": "responses",
        }
    }
    config["projects"] = {str(project): {"trust_level": "trusted"}}
    for key, value in (settings or {}).items():
        config[key] = value
    (home / ".codex" / "config.toml").write_text(tomlkit.dumps(config))


async def start_codex(
    tmux: Tmux,
    root: Path,
    model: FakeResponses,
    *,
    name: str = "codex",
    setup: Callable[[Path, Path], None] | None = None,
    until: str = PROMPT_HINT,
    settings: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> CodexPane:
    """Codex in session `name` of `tmux`, its HOME and project under `root`, returned once the
    pane shows `until` (its prompt; ``CODEX_HOOKS_REVIEW`` when new hooks await trust).
    `settings` go into its config.toml, `env` into its environment.

    ``--no-daemon``: otherwise Codex leaves an app-server daemon of its own running after the
    pane is gone (measured), with the environment of the first Codex that started it."""
    codex = await agent_binary("codex")
    home, project = root / "home", root / "project"
    prepare_codex_home(home, project, model, settings)
    if setup is not None:
        setup(home, project)
    variables = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "SCRIPTED_OPENAI_KEY": "sk-test-agentcomms",
        **(env or {}),
    }
    target = await _open_pane(tmux, name, project, variables, [str(codex), "--no-daemon"])
    pane = CodexPane(tmux, target, home, project, model)
    await pane.wait_for_screen(until, timeout=60)
    return pane


def prepare_gemini_home(
    home: Path, project: Path, settings: Mapping[str, Any] | None = None
) -> None:
    """A `HOME` in which Gemini CLI starts at its prompt in `project`, unattended: logged in
    with an API key (no auth dialog), folder trust off (no trust dialog), no update check, no
    usage statistics or telemetry. `settings` are merged over these (settings.json's keys)."""
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    project.mkdir(parents=True, exist_ok=True)
    user_settings: dict[str, Any] = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        **(settings or {}),
    }
    (home / ".gemini" / "settings.json").write_text(json.dumps(user_settings, indent=2))


@dataclass
class GeminiPane(AgentPane):
    """The real Gemini CLI, and the fake model it talks to."""

    model: FakeGemini

    async def wait_ready(self, *, timeout: float = 30) -> str:
        return await self.wait_for_screen(GEMINI_PROMPT_HINT, timeout=timeout)

    @staticmethod
    def input_line(screen: str) -> str:
        """Gemini CLI's input box: the last line that starts with its ``>`` (the prompts
        already sent show above it behind the same mark)."""
        marked = [line for line in screen.splitlines() if line.lstrip().startswith("> ")]
        return marked[-1] if marked else ""


async def start_gemini(
    tmux: Tmux,
    root: Path,
    model: FakeGemini,
    *,
    name: str = "gemini",
    setup: Callable[[Path, Path], None] | None = None,
    settings: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> GeminiPane:
    """Gemini CLI in session `name` of `tmux`, its HOME and project under `root`, returned at
    its prompt. `setup(home, project)` runs once both are prepared, before Gemini reads them
    (``agentcomms install gemini`` merges into the settings written here)."""
    gemini = await agent_binary("gemini")
    home, project = root / "home", root / "project"
    prepare_gemini_home(home, project, settings)
    if setup is not None:
        setup(home, project)
    variables = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "GEMINI_API_KEY": GEMINI_API_KEY,
        "GOOGLE_GEMINI_BASE_URL": model.base_url,
        **(env or {}),
    }
    target = await _open_pane(tmux, name, project, variables, [str(gemini)])
    pane = GeminiPane(tmux, target, home, project, model)
    await pane.wait_ready(timeout=90)
    return pane


@pytest.fixture(scope="session")
async def agent_clis() -> dict[str, Path]:
    """The real agents' executables by name, installed at their pinned versions. A test that
    starts a real agent asks for this fixture, directly or through another: that is what marks
    it `agents` (tests/conftest.py), so a quick run can leave it out."""
    return {name: await agent_binary(name) for name in _PACKAGES}


@pytest.fixture
async def anthropic(agent_clis: dict[str, Path]) -> AsyncIterator[FakeAnthropic]:
    """A scripted Anthropic model on a local port, for one test."""
    model = FakeAnthropic()
    async with model.server:
        yield model


@pytest.fixture
async def claude(tmux: Tmux, tmp_path: Path, anthropic: FakeAnthropic) -> ClaudePane:
    """The real Claude Code at its prompt, in manual mode, for one test."""
    return await start_claude(tmux, tmp_path / "claude", anthropic)


@pytest.fixture
async def responses(agent_clis: dict[str, Path]) -> AsyncIterator[FakeResponses]:
    """A scripted OpenAI Responses model on a local port, for one test."""
    model = FakeResponses()
    async with model.server:
        yield model


@pytest.fixture(scope="module")
async def module_anthropic(agent_clis: dict[str, Path]) -> AsyncIterator[FakeAnthropic]:
    model = FakeAnthropic()
    async with model.server:
        yield model


@pytest.fixture(scope="module")
async def module_claude(
    tmux_socket_dir: Path, tmp_path_factory: pytest.TempPathFactory, module_anthropic: FakeAnthropic
) -> AsyncIterator[ClaudePane]:
    """One real Claude Code shared by a module's tests, on its own tmux server."""
    server = Tmux(tmux_socket_dir / f"m-{uuid.uuid4().hex[:8]}")
    try:
        yield await start_claude(server, tmp_path_factory.mktemp("claude"), module_anthropic)
    finally:
        server.run("kill-server", check=False)
