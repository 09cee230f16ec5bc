"""The real Claude Code running as a Unix user of its own, set up as docs/agents/own-user.md
says: a user made for it (by this test, removed after), Claude Code where that user can run it,
agentcomms' hooks installed by that user with its agent id, its pane in the human's tmux running
it through `runuser` (the docs' `sudo -u`), its hooks reaching agentcomms only through the hooks'
own door and its MCP tools over HTTP with its token. Its permission request reaches the
human's approvals and is answered there, a message is typed into it, its MCP tools reach the
human, and a process it starts can neither approve its open request (on the door or
with `agentcomms approve`) nor reach the human's socket, config, deployment key or console
token.

One Claude serves the module; its scripted model keeps every test's words."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, SecurityConfig
from agentcomms.console_token import console_token
from agentcomms.trust import DeploymentKey
from tests.fakes.anthropic import FakeAnthropic, bash, text
from tests.fakes.scripted import tool
from tests.fakes.serve import free_port
from tests.support.agents import API_KEY, PROMPT_HINT, ClaudePane, prepare_claude_home
from tests.support.cli import AGENTCOMMS, cli
from tests.support.home import write_config
from tests.support.stack import Stack, register, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually

ALLOWED_BY_HOOK = "Allowed by PermissionRequest hook"
MCP_TOKEN = "own-user-mcp-token-0123456789"


@contextlib.asynccontextmanager
async def mcp_over_http(home: Path, log: Path) -> AsyncIterator[str]:
    """`agentcomms mcp --transport http` run as the human (a client of the human's socket); its
    URL once it accepts connections."""
    port = free_port()
    args = ["mcp", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)]
    env = {"PATH": os.environ["PATH"], "AGENTCOMMS_HOME": str(home)}
    with log.open("a") as written:
        process = await asyncio.create_subprocess_exec(
            AGENTCOMMS, *args, stdout=written, stderr=written, env=env
        )
        try:

            def accepts() -> bool:
                with socket.socket() as s:
                    return s.connect_ex(("127.0.0.1", port)) == 0 or process.returncode is not None

            await eventually(accepts, timeout=20)
            assert process.returncode is None, f"agentcomms mcp exited; see {log}"
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            if process.returncode is None:
                process.terminate()
            await asyncio.wait_for(process.wait(), 10)


@dataclass
class OwnUser:
    """The agent's Unix user, its home and project, and where it may write what it saw."""

    name: str
    home: Path
    project: Path
    out: Path  # written by the agent's processes, read by the test
    bin: Path  # the agent CLI and agentcomms, where that user can run them

    @property
    def agentcomms(self) -> Path:
        return self.bin / "agentcomms"

    def run(self, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
        assigned = [f"{k}={v}" for k, v in env.items()]
        return subprocess.run(
            ["runuser", "-u", self.name, "--", "env", "-i", *assigned, *argv],
            capture_output=True, text=True, cwd="/", timeout=120,
        )  # fmt: skip

    def chown(self, *paths: Path) -> None:
        for path in paths:
            subprocess.run(["chown", "-R", f"{self.name}:", str(path)], check=True)


@dataclass
class Setup:
    stack: Stack
    claude: ClaudePane
    agent_id: str
    user: OwnUser
    human: Path  # the human's agentcomms home: config, key, console token
    door: Path

    @property
    def model(self) -> FakeAnthropic:
        return self.claude.model

    async def approval(self) -> dict[str, Any] | None:
        done = await cli(self.human, "approvals", "--json")
        assert done.returncode == 0, done.stderr
        rows = json.loads(done.stdout)["approvals"]
        return next((r for r in rows if r["agent_id"] == self.agent_id), None)


def _need(reason: str) -> NoReturn:
    pytest.skip(f"an agent as its own Unix user: {reason}")


def _agentcomms_for(user: OwnUser, venv: Path) -> None:
    """An `agentcomms` the agent's user may run, as a user installs one for it (the docs say
    pipx): a virtualenv of the system's Python, beside its home, that finds the tests' own
    packages (the tests' Python itself may sit in root's home, closed to others)."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        _need("no python3 in /usr/bin or /bin for the agent's user (apt-get install python3)")
    same = subprocess.run(
        [python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
    )
    if same.stdout.strip() != str(sys.version_info[:2]):
        _need(f"the system's {python} is not the tests' Python {sys.version_info[:2]}")
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = venv.glob("lib/python3*/site-packages")
    tests_site = next(p for p in map(Path, sys.path) if p.name == "site-packages" and p.is_dir())
    (site / "tests-packages.pth").write_text(f"import site; site.addsitedir({str(tests_site)!r})\n")
    user.agentcomms.write_text(
        f"#!{venv}/bin/python\nimport sys\nfrom agentcomms.cli import main\nsys.exit(main())\n"
    )
    user.agentcomms.chmod(0o755)
    subprocess.run(["chmod", "-R", "a+rX", str(venv)], check=True)


@pytest.fixture(scope="module")
def open_folder() -> Iterator[Path]:
    """A folder any user may pass through (the tests' own temporary folders are root's only)."""
    folder = Path(tempfile.mkdtemp(prefix="agentcomms-own-user-"))
    folder.chmod(0o711)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def own_user(agent_clis: dict[str, Path], open_folder: Path) -> Iterator[OwnUser]:
    """A user made for the agent (removed after), with Claude Code where it can run it: the
    tests' npm install sits in root's home, which no other user may enter, so the executable is
    linked (or copied) beside the user's home, as a user installs it system-wide or for it."""
    if os.getuid() != 0:
        _need("making a user and starting its processes needs root")
    for program in ("useradd", "userdel", "runuser"):
        if shutil.which(program) is None:
            _need(f"`{program}` is missing (apt-get install passwd util-linux)")
    name = f"acagent{uuid.uuid4().hex[:8]}"
    home = open_folder / "agent-home"
    made = subprocess.run(
        ["useradd", "--home-dir", str(home), "--create-home", "--shell", "/bin/sh", name],
        capture_output=True, text=True,
    )  # fmt: skip
    if made.returncode != 0:
        _need(f"useradd failed: {made.stderr.strip()}")
    try:
        bin_dir = open_folder / "bin"
        bin_dir.mkdir()
        bin_dir.chmod(0o755)
        claude = bin_dir / "claude"
        real = agent_clis["claude"].resolve()
        try:
            os.link(real, claude)  # the same file, without its 400 MB copied
        except OSError:
            shutil.copy2(real, claude)
        claude.chmod(0o755)
        out = open_folder / "out"
        out.mkdir()
        out.chmod(0o777)
        user = OwnUser(name, home, home / "project", out, bin_dir)
        _agentcomms_for(user, open_folder / "venv")
        runs = user.run({"HOME": str(home)}, str(user.agentcomms), "--help")
        if runs.returncode != 0:
            _need(
                "the tests' packages cannot be read by another user (their folders are "
                f"closed to others): {runs.stderr.strip()[-300:]}"
            )
        yield user
    finally:
        _end_processes_of(name)
        subprocess.run(["userdel", name], capture_output=True, check=False)


def _end_processes_of(name: str) -> None:
    """End what the test's user still runs (what the agent started in the background outlives
    its pane), by process id, so its user and folder can go."""
    made = subprocess.run(["id", "-u", name], capture_output=True, text=True)
    if made.returncode != 0:
        return
    uid = int(made.stdout)
    for _ in range(50):
        pids = [
            int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _owner(p) == uid
        ]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def _owner(proc: Path) -> int | None:
    try:
        return proc.stat().st_uid
    except FileNotFoundError:
        return None


@pytest.fixture(scope="module")
async def setup(
    own_user: OwnUser,
    open_folder: Path,
    temporal_env: WorkflowEnvironment,
    tmux_socket_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Setup]:
    user = own_user
    human = open_folder / "human"
    door = open_folder / "hooks.sock"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENTCOMMS_HOME", str(human))
        agent_id = f"own-{uuid.uuid4().hex[:6]}"
        write_config(
            human,
            {
                "server": {"socket_path": str(open_folder / "daemon.sock")},
                "agents": {agent_id: {"target": "agent:0.0", "token": MCP_TOKEN}},
            },
        )
        human.chmod(0o711)  # passable, so each file's own mode is what refuses
        console_token()
        DeploymentKey.load(SecurityConfig())

        def configure(cfg: Config) -> Config:
            server = cfg.server.model_copy(update={"hooks_socket_path": door})
            return cfg.model_copy(update={"server": server})

        root = tmp_path_factory.mktemp("own-user")
        model = FakeAnthropic()
        tmux = Tmux(tmux_socket_dir / f"u-{uuid.uuid4().hex[:8]}")
        async with (
            contextlib.AsyncExitStack() as stack_mcp,
            running_stack(
                temporal_env.client,
                root,
                socket_path=open_folder / "daemon.sock",
                configure=configure,
            ) as stack,
            model.server,
        ):
            # Its permission mode is install's to write, as the docs say (Claude Code's own
            # default, auto mode, asks no hook).
            prepare_claude_home(user.home, user.project, default_mode=None)
            user.chown(user.home)
            env = {"HOME": str(user.home), "PATH": f"{user.bin}:/usr/bin:/bin"}
            installed = await asyncio.to_thread(
                user.run,
                env,
                str(user.agentcomms),
                "install",
                "claude-code",
                "--agent",
                agent_id,
                "--permission-mode",
                "default",
            )
            assert installed.returncode == 0, installed.stdout + installed.stderr
            # Its MCP tools over HTTP, served as the human, reached with its token in place of
            # the stdio server install added (which runs as the agent's user, off the socket).
            mcp = await stack_mcp.enter_async_context(mcp_over_http(human, root / "mcp.log"))
            for argv in (
                ["mcp", "remove", "--scope", "user", "agentcomms"],
                ["mcp", "add", "--scope", "user", "--transport", "http", "agentcomms", mcp,
                 "--header", f"Authorization: Bearer {MCP_TOKEN}"],
            ):  # fmt: skip
                done = await asyncio.to_thread(user.run, env, "claude", *argv)
                assert done.returncode == 0, done.stdout + done.stderr
            # As the docs start it: the agent's user in a pane of the human's tmux, its
            # environment its own (sudo -i keeps neither TMUX nor TMUX_PANE), its hooks pointed
            # at the door.
            variables = {
                **env,
                "TERM": "xterm-256color",
                "LANG": "C.UTF-8",
                "ANTHROPIC_BASE_URL": model.base_url,
                "ANTHROPIC_API_KEY": API_KEY,
                "DISABLE_TELEMETRY": "1",
                "DISABLE_ERROR_REPORTING": "1",
                "DISABLE_AUTOUPDATER": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "AGENTCOMMS_SOCKET": str(door),
            }
            assigned = " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items())
            start = shlex.quote(f"cd {shlex.quote(str(user.project))} && exec claude")
            command = f"runuser -u {user.name} -- env -i {assigned} sh -c {start}; exec sh"
            try:
                await asyncio.to_thread(
                    tmux.run, "new-session", "-d", "-s", "agent", "-x", "200", "-y", "50", command
                )
                claude = ClaudePane(tmux, "agent:0.0", user.home, user.project, model)
                await claude.wait_for_screen(PROMPT_HINT, timeout=90)
                await register(stack, agent_id, tmux, claude.target, submit_delay_ms=300)
                yield Setup(stack, claude, agent_id, user, human, door)
            finally:
                tmux.run("kill-server", check=False)


async def test_its_permission_request_reaches_the_humans_approvals_and_is_answered(
    setup: Setup,
) -> None:
    """The human's message is typed into its pane; the tool it then asks for waits on the
    human's approvals, and the human's answer runs it, as the agent's user."""
    claude, model = setup.claude, setup.model
    model.on("make the own file", bash("touch own.txt"), text("Own file made."))
    sent = await setup.stack.call("send", agent_id=setup.agent_id, message="make the own file")
    assert sent["event_id"]
    approval = await eventually(setup.approval, timeout=60)
    assert (approval["tool"], approval["input"]) == ("Bash", "touch own.txt")

    done = await cli(setup.human, "approve", approval["id"])
    assert done.returncode == 0, done.stderr
    await claude.wait_for_screen(ALLOWED_BY_HOOK)
    await claude.wait_for_screen("Own file made.")
    made = claude.project / "own.txt"
    assert made.exists()
    assert made.owner() == setup.user.name
    traced = await setup.stack.call("trace", event_id=approval["id"])
    assert traced["status"].startswith("allowed by ")


# Started by the agent (its Bash tool, in the background), as the agent's user: once told the
# id of the agent's request still open, it tries every way to answer it and every secret of the
# human's, and writes what each try got.
TRIES = """
import json, os, socket, subprocess, sys, time
out, agentcomms, door, human_socket, *secrets = sys.argv[1:]
while not os.path.exists(out + "/ask"):
    time.sleep(0.1)
approval = open(out + "/ask").read().strip()
tried = {}
def ask(path, method, params):
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(path)
            s.sendall(json.dumps({"id": 1, "method": method, "params": params}).encode() + b"\\n")
            return json.loads(s.makefile().readline()).get("error", {}).get("message", "ANSWERED")
    except OSError as exc:
        return type(exc).__name__
tried["door"] = ask(door, "approval_decide", {"id": approval, "behavior": "allow"})
tried["socket"] = ask(human_socket, "approval_decide", {"id": approval, "behavior": "allow"})
for where, path in [("door", door), ("socket", human_socket)]:
    env = dict(os.environ, AGENTCOMMS_SERVER__SOCKET_PATH=path)
    cli = subprocess.run([agentcomms, "approve", approval], env=env, capture_output=True, text=True)
    tried["cli at the " + where] = [cli.returncode, cli.stdout + cli.stderr]
for path in secrets:
    try:
        tried[path] = open(path).read()
    except OSError as exc:
        tried[path] = type(exc).__name__
with open(out + "/tried.json", "w") as f:
    json.dump(tried, f)
"""


async def test_what_it_starts_cannot_approve_its_open_request_nor_read_the_humans_secrets(
    setup: Setup,
) -> None:
    claude, model, out = setup.claude, setup.model, setup.user.out
    script = out / "tries.py"
    script.write_text(TRIES)
    script.chmod(0o644)
    secrets = [setup.human / "config.json", setup.human / "deployment.key"]
    secrets.append(setup.human / "console.token")
    argv = [
        str(setup.user.agentcomms),
        str(setup.door),
        str(setup.stack.cfg.server.socket()),
        *map(str, secrets),
    ]
    tries = f"python3 {script} {out} {shlex.join(argv)}"
    await claude.wait_ready()
    model.on(
        "try the human's doors",
        tool("Bash", command=tries, description="Try the doors", run_in_background=True),
        bash("touch second.txt"),
        text("Second made."),
    )
    await claude.type("try the human's doors")
    trying = await eventually(setup.approval, timeout=60)
    assert tries in trying["input"]
    assert (await cli(setup.human, "approve", trying["id"])).returncode == 0

    async def second() -> dict[str, Any] | None:
        open_one = await setup.approval()
        return open_one if open_one and open_one["input"] == "touch second.txt" else None

    waiting = await eventually(second, timeout=60)
    (out / "ask").write_text(waiting["id"])
    await eventually(lambda: (out / "tried.json").exists(), timeout=60)
    tried = json.loads((out / "tried.json").read_text())

    assert "decides for the human" in tried["door"], tried
    assert tried["socket"] == "PermissionError", tried
    code, said = tried["cli at the door"]
    assert code != 0 and "decides for the human" in said, tried
    code, said = tried["cli at the socket"]
    assert code != 0 and "Permission denied" in said, tried
    assert [tried[str(path)] for path in secrets] == ["PermissionError"] * 3, tried
    still = await setup.approval()  # nothing it tried answered it
    assert still is not None and still["id"] == waiting["id"]
    assert (await cli(setup.human, "approve", waiting["id"])).returncode == 0
    await claude.wait_for_screen("Second made.")
    traced = await setup.stack.call("trace", event_id=waiting["id"])
    assert traced["status"].startswith("allowed by "), traced
    with contextlib.suppress(FileNotFoundError):
        (out / "ask").unlink()


async def test_its_mcp_tools_reach_the_human_over_http_with_its_token(setup: Setup) -> None:
    claude, model = setup.claude, setup.model
    await claude.wait_ready()
    words = "hello from an agent of its own user"
    model.on(
        "tell me over mcp",
        tool("mcp__agentcomms__send_message", provider="local", chat_id="local", message=words),
        text("Told you."),
    )
    await claude.type("tell me over mcp")
    asking = await eventually(setup.approval, timeout=60)  # an MCP tool asks too
    assert asking["tool"] == "mcp__agentcomms__send_message", asking
    assert (await cli(setup.human, "approve", asking["id"])).returncode == 0
    await claude.wait_for_screen("Told you.")

    async def received() -> list[dict[str, Any]] | None:
        done = await cli(setup.human, "inbox", "--json")
        assert done.returncode == 0, done.stderr
        rows = json.loads(done.stdout)["messages"]
        return [r for r in rows if words in json.dumps(r)] or None

    (message,) = await eventually(received, timeout=30)
    assert setup.agent_id in json.dumps(message), message  # its token said who it is
