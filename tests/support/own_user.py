"""A real agent running as a Unix user of its own, set up as docs/agents/own-user.md says: a
user made for it (by the test, removed after), the agent CLI and an `agentcomms` where that user
can run them, the human's agentcomms home with its hooks' own door, and the script a process the
agent starts runs to try every door and secret of the human's.

The fixtures need root (to make the user and start its processes); without it they skip,
saying why."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, NoReturn, TypeVar

import pytest
from temporalio.client import Client

from agentcomms.config import Config, SecurityConfig
from agentcomms.console_token import console_token
from agentcomms.trust import DeploymentKey
from tests.fakes.serve import free_port
from tests.support.agents import ClaudePane, CodexPane, GeminiPane
from tests.support.home import write_config
from tests.support.stack import Stack, register, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually

MCP_TOKEN = "own-user-mcp-token-0123456789"


def need(reason: str) -> NoReturn:
    pytest.skip(f"an agent as its own Unix user: {reason}")


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

    def link(self, name: str, executable: Path) -> Path:
        """`executable` as `name` beside agentcomms: the same file (the tests' npm install sits
        in root's home, which no other user may enter), or a copy on another file system."""
        linked = self.bin / name
        try:
            os.link(executable.resolve(), linked)  # without its hundreds of MB copied
        except OSError:
            shutil.copy2(executable.resolve(), linked)
        linked.chmod(0o755)
        return linked

    def node_program(self, name: str, package: Path, script: str) -> Path:
        """A Node program's whole package (`package`), linked file by file beside agentcomms,
        and `name` running its `script` with the system's node."""
        node = shutil.which("node", path="/usr/bin:/usr/local/bin:/bin")
        if node is None:
            need("no node in /usr/bin or /usr/local/bin for the agent's user")
        copy = self.bin.parent / package.name
        subprocess.run(["cp", "-al", str(package.resolve()), str(copy)], check=True)
        subprocess.run(["chmod", "-R", "a+rX", str(copy)], check=True)
        program = self.bin / name
        program.write_text(f'#!/bin/sh\nexec {node} {copy / script} "$@"\n')
        program.chmod(0o755)
        return program

    def pane_command(self, variables: dict[str, str], program: str) -> str:
        """What a pane of the human's tmux runs, as the docs start it: the agent's user, its
        environment its own (sudo -i keeps neither TMUX nor TMUX_PANE), in its project."""
        import shlex

        assigned = " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items())
        start = shlex.quote(f"cd {shlex.quote(str(self.project))} && exec {program}")
        return f"runuser -u {self.name} -- env -i {assigned} sh -c {start}; exec sh"


def system_python() -> str:
    """A Python another user may run (the tests' own may sit in a home only its user opens)."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    assert python is not None, "no python3 in /usr/bin or /bin: `apt-get install python3`"
    return python


def _agentcomms_for(user: OwnUser, venv: Path) -> None:
    """An `agentcomms` the agent's user may run, as a user installs one for it (the docs say
    pipx): a virtualenv of the system's Python, beside its home, that finds the tests' own
    packages (the tests' Python itself may sit in root's home, closed to others)."""
    python = system_python()
    same = subprocess.run(
        [python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
    )
    if same.stdout.strip() != str(sys.version_info[:2]):
        need(f"the system's {python} is not the tests' Python {sys.version_info[:2]}")
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
    """A user made for the agent (removed after), with an `agentcomms` it may run; each module
    puts its agent CLI beside it (:meth:`OwnUser.link`, :meth:`OwnUser.node_program`)."""
    if os.getuid() != 0:
        need("making a user and starting its processes needs root")
    for program in ("useradd", "userdel", "runuser"):
        if shutil.which(program) is None:
            need(f"`{program}` is missing (apt-get install passwd util-linux)")
    name = f"acagent{uuid.uuid4().hex[:8]}"
    home = open_folder / "agent-home"
    made = subprocess.run(
        ["useradd", "--home-dir", str(home), "--create-home", "--shell", "/bin/sh", name],
        capture_output=True, text=True,
    )  # fmt: skip
    if made.returncode != 0:
        need(f"useradd failed: {made.stderr.strip()}")
    try:
        bin_dir = open_folder / "bin"
        bin_dir.mkdir()
        bin_dir.chmod(0o755)
        out = open_folder / "out"
        out.mkdir()
        out.chmod(0o777)
        user = OwnUser(name, home, home / "project", out, bin_dir)
        _agentcomms_for(user, open_folder / "venv")
        runs = user.run({"HOME": str(home)}, str(user.agentcomms), "--help")
        if runs.returncode != 0:
            need(
                "the tests' packages cannot be read by another user (their folders are "
                f"closed to others): {runs.stderr.strip()[-300:]}"
            )
        yield user
    finally:
        end_processes_of(name)
        subprocess.run(["userdel", name], capture_output=True, check=False)


def end_processes_of(name: str) -> None:
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


def human_home(open_folder: Path, agent: dict[str, Any]) -> tuple[Path, str]:
    """The human's agentcomms home in `open_folder` (passable, so each file's own mode is what
    refuses), its config naming the socket beside it and one agent (`agent`: its settings),
    with its console token and deployment key made; the home and the agent's id. The caller
    points AGENTCOMMS_HOME at it first."""
    human = open_folder / "human"
    agent_id = f"own-{uuid.uuid4().hex[:6]}"
    write_config(
        human,
        {
            "server": {"socket_path": str(open_folder / "daemon.sock")},
            "agents": {agent_id: agent},
        },
    )
    human.chmod(0o711)
    console_token()
    DeploymentKey.load(SecurityConfig())
    return human, agent_id


P = TypeVar("P", ClaudePane, CodexPane, GeminiPane)


@dataclass
class HumansSide:
    """The human's side of a module: a stack serving the human's home, the hooks' own door the
    agent's user reaches, and the human's tmux server, where the agent's pane runs."""

    stack: Stack
    home: Path  # the human's agentcomms home: config, key, console token
    agent_id: str
    door: Path
    tmux: Tmux

    async def start_agent(self, user: OwnUser, variables: Mapping[str, str], command: str) -> None:
        """The agent's `command`, as its user, in session ``agent`` of the human's tmux, as the
        docs start it (sudo -i keeps neither TMUX nor TMUX_PANE: `variables` are its whole
        environment)."""
        line = user.pane_command(dict(variables), command)
        await asyncio.to_thread(
            self.tmux.run, "new-session", "-d", "-s", "agent", "-x", "200", "-y", "50", line
        )

    async def registered(self, pane: P, user: OwnUser) -> OwnSetup[P]:
        """The agent's pane registered as the human's agent: the module's setup."""
        await register(self.stack, self.agent_id, self.tmux, pane.target, submit_delay_ms=300)
        return OwnSetup(self.stack, pane, self.agent_id, user, self.home, self.door)


@contextlib.asynccontextmanager
async def humans_stack(
    open_folder: Path, client: Client, root: Path, agent: dict[str, Any], tmux_dir: Path
) -> AsyncIterator[HumansSide]:
    """The human's agentcomms home (:func:`human_home`, AGENTCOMMS_HOME while it runs), a stack
    serving it on the human's socket, which the agent's user cannot reach, and on the hooks'
    own door, which it can, and a tmux server of the human's in `tmux_dir` (ended first)."""
    door = open_folder / "hooks.sock"
    tmux = Tmux(tmux_dir / f"u-{uuid.uuid4().hex[:8]}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENTCOMMS_HOME", str(open_folder / "human"))
        human, agent_id = human_home(open_folder, agent)

        def configure(cfg: Config) -> Config:
            server = cfg.server.model_copy(update={"hooks_socket_path": door})
            return cfg.model_copy(update={"server": server})

        socket_path = open_folder / "daemon.sock"
        async with running_stack(client, root, socket_path=socket_path, configure=configure) as s:
            try:
                yield HumansSide(s, human, agent_id, door, tmux)
            finally:
                tmux.run("kill-server", check=False)


async def install_as(user: OwnUser, env: dict[str, str], *argv: str) -> str:
    """`agentcomms install …` run by the agent's user, as the docs have it do; what it said."""
    done = await asyncio.to_thread(user.run, env, str(user.agentcomms), "install", *argv)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@dataclass
class OwnSetup(Generic[P]):
    """A stack serving the human, the real agent running as a user of its own in a pane of the
    human's tmux (its scripted model keeps every test's words), and the human's home."""

    stack: Stack
    pane: P
    agent_id: str
    user: OwnUser
    human: Path  # the human's agentcomms home: config, key, console token
    door: Path  # the hooks' own door: the one the agent's user reaches

    async def approval(self) -> dict[str, Any] | None:
        return await open_approval(self.human, self.agent_id)


async def own_file_asked(setup: OwnSetup[Any], *steps: Any) -> dict[str, Any]:
    """The human's message is typed into the agent's pane; the command its model then runs
    (`steps`: ``touch own.txt``, then "Own file made.") waits on the human's approvals. The
    request, as the human lists it."""
    setup.pane.model.on("make the own file", *steps)
    sent = await setup.stack.call("send", agent_id=setup.agent_id, message="make the own file")
    assert sent["event_id"]
    approval = await eventually(setup.approval, timeout=60)
    assert "touch own.txt" in approval["input"], approval
    return dict(approval)


async def own_file_made(setup: OwnSetup[Any], approval: dict[str, Any]) -> None:
    """The human's answer to :func:`own_file_asked`'s request runs it, as the agent's user."""
    from tests.support.cli import cli  # cli imports the stack, as this module does

    done = await cli(setup.human, "approve", approval["id"])
    assert done.returncode == 0, done.stderr
    await setup.pane.wait_for_screen("Own file made.")
    made = setup.pane.project / "own.txt"
    assert made.exists()
    assert made.owner() == setup.user.name
    traced = await setup.stack.call("trace", event_id=approval["id"])
    assert traced["status"].startswith("allowed by "), traced


async def doors_tried(setup: OwnSetup[Any], tries_step: Callable[[str], Any], *then: Any) -> None:
    """The agent starts :data:`TRIES` in the background (`tries_step` of its command line; the
    human approves it), then asks for ``touch second.txt`` (`then`, ending "Second made."):
    nothing the tries do answers that open request, nor reads the human's secrets, and the
    human's own answer runs it."""
    from tests.support.cli import cli

    pane, out = setup.pane, setup.user.out
    tries = tries_command(setup.user, setup.human, setup.door, setup.stack.cfg.server.socket())
    await pane.wait_ready()
    pane.model.on("try the human's doors", tries_step(tries), *then)
    await pane.type("try the human's doors")
    trying = await eventually(setup.approval, timeout=60)
    assert "tries.py" in trying["input"], trying
    assert (await cli(setup.human, "approve", trying["id"])).returncode == 0

    async def second() -> dict[str, Any] | None:
        open_one = await setup.approval()
        return open_one if open_one and "second.txt" in open_one["input"] else None

    waiting = await eventually(second, timeout=60)
    # Whole once it shows: the tries wait for the file to exist, then read it at once.
    (out / "ask.part").write_text(waiting["id"])
    (out / "ask.part").rename(out / "ask")
    try:
        await eventually(lambda: (out / "tried.json").exists(), timeout=60)
        check_tries(json.loads((out / "tried.json").read_text()), setup.human)
        still = await setup.approval()  # nothing it tried answered it
        assert still is not None and still["id"] == waiting["id"]
        assert (await cli(setup.human, "approve", waiting["id"])).returncode == 0
        await pane.wait_for_screen("Second made.")
        traced = await setup.stack.call("trace", event_id=waiting["id"])
        assert traced["status"].startswith("allowed by "), traced
    finally:
        (out / "ask").unlink(missing_ok=True)
        (out / "tried.json").unlink(missing_ok=True)


@contextlib.asynccontextmanager
async def mcp_over_http(home: Path, log: Path) -> AsyncIterator[str]:
    """`agentcomms mcp --transport http` run as the human (a client of the human's socket); its
    URL once it accepts connections."""
    from tests.support.cli import AGENTCOMMS

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


async def open_approval(human: Path, agent_id: str) -> dict[str, Any] | None:
    """The agent's open approval, as the human's `agentcomms approvals --json` lists it."""
    from tests.support.cli import cli

    done = await cli(human, "approvals", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["approvals"]
    return next((r for r in rows if r["agent_id"] == agent_id), None)


# Started by the agent (in the background), as the agent's user: once told the id of the agent's
# request still open, it tries every way to answer it and every secret of the human's, and
# writes what each try got.
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
with open(out + "/tried.part", "w") as f:
    json.dump(tried, f)
os.rename(out + "/tried.part", out + "/tried.json")  # whole once it shows
"""


def tries_command(user: OwnUser, human: Path, door: Path, human_socket: Path) -> str:
    """The command line that starts :data:`TRIES` as the agent would, and writes the script."""
    import shlex

    script = user.out / "tries.py"
    script.write_text(TRIES)
    script.chmod(0o644)
    secrets = [human / "config.json", human / "deployment.key", human / "console.token"]
    argv = [str(user.agentcomms), str(door), str(human_socket), *map(str, secrets)]
    return f"python3 {script} {user.out} {shlex.join(argv)}"


def check_tries(tried: dict[str, Any], human: Path) -> None:
    """Every try of :data:`TRIES` was refused, each for its reason."""
    assert "decides for the human" in tried["door"], tried
    assert tried["socket"] == "PermissionError", tried
    code, said = tried["cli at the door"]
    assert code != 0 and "decides for the human" in said, tried
    code, said = tried["cli at the socket"]
    assert code != 0 and "is not yours (permission denied)" in said, tried
    assert "Traceback" not in said, tried
    secrets = [human / "config.json", human / "deployment.key", human / "console.token"]
    assert [tried[str(path)] for path in secrets] == ["PermissionError"] * 3, tried
