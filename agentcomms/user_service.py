"""`agentcomms up` as the user's own service, so it outlives the terminal that started it.

On Linux a systemd user unit (restarted on failure, started at login); on macOS a launchd agent.
Both files are generated on any system, so either can be checked anywhere. The service runs this
very agentcomms (its absolute path, as the hooks do) with the agentcomms home and the PATH of the
shell that installed it: a service starts with almost no environment, and `up` needs tmux and
the Temporal binary. Installing writes only the unit and asks the service manager to start it;
uninstalling stops it and removes the unit, never the config or the data.

Standard library only: `agentcomms status` reports on the service and must stay quick.
"""

from __future__ import annotations

import os
import plistlib
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agentcomms.config.home import HOME_ENV, agentcomms_home
from agentcomms.errors import AgentcommsError

Manager = Literal["systemd", "launchd"]
UNIT_NAME = "agentcomms.service"
LAUNCHD_LABEL = "dev.agentcomms.up"
# Variables the service must see as the installing shell saw them: where the home is, where
# tmux and the Temporal binary are, and where tmux keeps its sockets (the panes' server).
CARRIED_ENV = (HOME_ENV, "PATH", "TMUX_TMPDIR")
LINGER_FIX = "loginctl enable-linger $USER"
# `up`'s own log: a few files of this size, the oldest dropped; enough for days of a busy host.
LOG_MAX_BYTES = 10 * 1024 * 1024
LOG_BACKUPS = 5
_COMMAND_TIMEOUT_S = 15


class ServiceError(AgentcommsError):
    """The service cannot be written as asked."""


def manager_here() -> Manager:
    return "launchd" if sys.platform == "darwin" else "systemd"


def default_log_file() -> Path:
    """Where `up` logs when ``logging.file`` is not set, and where `service logs` reads."""
    return agentcomms_home() / "logs" / "agentcomms.log"


def env_file() -> Path:
    """Variables for the service that the config's ``${VAR}`` references need (systemd reads
    it when present): the service does not see the installing shell's secrets."""
    return agentcomms_home() / "service.env"


@dataclass(frozen=True)
class Spec:
    """What the service runs, and with what around it."""

    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    log_dir: Path = field(default_factory=lambda: default_log_file().parent)
    env_file: Path = field(default_factory=env_file)

    @classmethod
    def here(cls) -> Spec:
        from agentcomms.agents.install import agentcomms_argv

        env = {name: os.environ[name] for name in CARRIED_ENV if os.environ.get(name)}
        env[HOME_ENV] = str(agentcomms_home().absolute())
        return cls(argv=(*agentcomms_argv(), "up", "--headless"), env=env)


def unit_path(manager: Manager) -> Path:
    if manager == "launchd":
        return Path.home() / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "systemd" / "user" / UNIT_NAME


def _systemd_quote(value: str) -> str:
    # systemd unquotes "…" with C-style escapes and expands % specifiers, even inside quotes.
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return f'"{escaped}"'


def systemd_unit(spec: Spec) -> str:
    if any(c in spec.argv[0] for c in "\"'\\"):
        # systemd refuses such an executable's name, whatever the quoting.
        raise ServiceError(
            f"systemd cannot run {spec.argv[0]}: its path holds a quote or a backslash; "
            "install agentcomms at a path without them (a virtualenv elsewhere), then run "
            "`agentcomms service install` from there"
        )
    environment = " ".join(_systemd_quote(f"{k}={v}") for k, v in sorted(spec.env.items()))
    command = " ".join(_systemd_quote(arg) for arg in spec.argv)
    return "\n".join(
        [
            "# Written by `agentcomms service install`; `agentcomms service uninstall` removes it.",
            "[Unit]",
            "Description=agentcomms: durable messages between AI agents and their humans",
            "",
            "[Service]",
            "Type=simple",
            f"ExecStart={command}",
            # A crash is restarted; a stop asked for (`systemctl --user stop`) is not.
            "Restart=on-failure",
            "RestartSec=5",
            # The gateway, the worker and the embedded Temporal stop together on SIGTERM.
            "TimeoutStopSec=60",
            f"Environment={environment}",
            # Optional ("-"): read when present. A path here takes no quotes, only %% for %.
            f"EnvironmentFile=-{str(spec.env_file).replace('%', '%%')}",
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
    )


def launchd_plist(spec: Spec) -> str:
    plist = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": list(spec.argv),
        "EnvironmentVariables": dict(sorted(spec.env.items())),
        "RunAtLoad": True,
        # Restarted when it exits with a failure, as systemd's Restart=on-failure.
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 5,
        # What `up` prints before its logging starts (a broken config) is kept here.
        "StandardOutPath": str(spec.log_dir / "service.out"),
        "StandardErrorPath": str(spec.log_dir / "service.out"),
        "ProcessType": "Background",
    }
    return plistlib.dumps(plist).decode()


def render(manager: Manager, spec: Spec) -> str:
    return launchd_plist(spec) if manager == "launchd" else systemd_unit(spec)


# ---- the service manager ----------------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    """A service manager's command: whether it could be asked at all, and its answer."""

    reachable: bool
    code: int
    output: str


def _run(argv: list[str]) -> Ran:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=_COMMAND_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Ran(False, -1, str(exc))
    output = (done.stdout + done.stderr).strip()
    # systemctl --user without a user manager (a container, a login without a session bus).
    unreachable = "Failed to connect to bus" in output or "No medium found" in output
    return Ran(not unreachable, done.returncode, output)


def systemctl(*args: str) -> Ran:
    return _run(["systemctl", "--user", *args])


def launchctl(*args: str) -> Ran:
    return _run(["launchctl", *args])


def _no_systemd(ran: Ran) -> str:
    return (
        f"systemctl --user is not available here ({ran.output or 'no user manager'}): the unit "
        "is written, but nothing starts it. Log in through a session with a systemd user "
        "manager and run `systemctl --user enable --now agentcomms`, or run "
        "`agentcomms up --headless` yourself"
    )


def _no_launchd(ran: Ran) -> str:
    return (
        f"launchctl is not available here ({ran.output}): the agent is written; load it with "
        f"`launchctl bootstrap gui/$(id -u) {unit_path('launchd')}`"
    )


@dataclass
class Outcome:
    """What an install or uninstall changed, and what the user should know or do."""

    path: Path
    changed: bool
    notes: list[str] = field(default_factory=list)


def install(manager: Manager | None = None, spec: Spec | None = None) -> Outcome:
    """Write the unit (unless it is already exactly this one) and start the service."""
    manager = manager or manager_here()
    spec = spec or Spec.here()
    path = unit_path(manager)
    text = render(manager, spec)
    before = path.read_text(encoding="utf-8") if path.exists() else None
    changed = before != text
    if changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        spec.log_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    outcome = Outcome(path, changed)
    if manager == "systemd":
        _start_systemd(outcome, restart=changed and before is not None)
        outcome.notes.append(
            f"variables your config's ${{VAR}} references need go in {spec.env_file} "
            "(KEY=value lines, mode 0600): the service does not see your shell's"
        )
    else:
        _start_launchd(outcome, path, reload=changed and before is not None)
    return outcome


def _start_systemd(outcome: Outcome, *, restart: bool) -> None:
    ran = systemctl("daemon-reload")
    if not ran.reachable:
        outcome.notes.append(_no_systemd(ran))
        return
    for step in (
        ["enable", UNIT_NAME],
        # A changed unit (a moved virtualenv) takes effect now; an unchanged one is left running.
        ["restart" if restart else "start", UNIT_NAME],
    ):
        ran = systemctl(*step)
        if ran.code != 0:
            outcome.notes.append(f"`systemctl --user {shlex.join(step)}` failed: {ran.output}")
            return
    outcome.notes.append(f"to keep it running after you log out: `{LINGER_FIX}`")


def _start_launchd(outcome: Outcome, path: Path, *, reload: bool) -> None:
    domain = f"gui/{os.getuid()}"
    if reload:
        launchctl("bootout", f"{domain}/{LAUNCHD_LABEL}")
    ran = launchctl("bootstrap", domain, str(path))
    if not ran.reachable:
        outcome.notes.append(_no_launchd(ran))
    elif ran.code != 0 and "already" not in ran.output.lower() and not _launchd_loaded():
        outcome.notes.append(f"`launchctl bootstrap {domain} {path}` failed: {ran.output}")


def _launchd_loaded() -> bool:
    ran = launchctl("print", f"gui/{os.getuid()}/{LAUNCHD_LABEL}")
    return ran.reachable and ran.code == 0


def uninstall(manager: Manager | None = None) -> Outcome:
    """Stop the service and remove its unit; the config, the data and the logs stay."""
    manager = manager or manager_here()
    path = unit_path(manager)
    outcome = Outcome(path, path.exists())
    if not outcome.changed:
        return outcome
    if manager == "systemd":
        ran = systemctl("disable", "--now", UNIT_NAME)
        if not ran.reachable:
            outcome.notes.append(f"systemctl --user is not available here ({ran.output})")
    else:
        launchctl("bootout", f"gui/{os.getuid()}/{LAUNCHD_LABEL}")
    path.unlink()
    if manager == "systemd":
        systemctl("daemon-reload")
    outcome.notes.append(f"the config and data in {agentcomms_home()} are left as they are")
    return outcome


# ---- status ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Status:
    """Whether the service is installed and running; `running` is None when no one can say."""

    manager: Manager
    path: Path
    installed: bool
    running: bool | None
    detail: str
    fix: str | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "manager": self.manager,
            "unit": str(self.path),
            "installed": self.installed,
            "running": self.running,
            "detail": self.detail,
            "fix": self.fix,
        }


def status(manager: Manager | None = None) -> Status:
    manager = manager or manager_here()
    path = unit_path(manager)
    if not path.exists():
        return Status(
            manager,
            path,
            False,
            None,
            "not installed: agentcomms runs only while `agentcomms up` runs",
            "`agentcomms service install` keeps it running, restarted on failure and at login",
        )
    if manager == "launchd":
        ran = launchctl("print", f"gui/{os.getuid()}/{LAUNCHD_LABEL}")
        if not ran.reachable:
            return Status(manager, path, True, None, f"installed; {_no_launchd(ran)}")
        running = ran.code == 0 and "state = running" in ran.output
        return Status(
            manager,
            path,
            True,
            running,
            "installed and running" if running else "installed, not running",
            None if running else "`agentcomms service logs` says why",
        )
    ran = systemctl("is-active", UNIT_NAME)
    if not ran.reachable:
        return Status(manager, path, True, None, f"installed; {_no_systemd(ran)}")
    state = ran.output.splitlines()[-1] if ran.output else "unknown"
    if state != "active":
        return Status(
            manager,
            path,
            True,
            False,
            f"installed, {state}",
            "`agentcomms service logs` says why; `systemctl --user start agentcomms` starts it",
        )
    lingers = linger()
    return Status(
        manager,
        path,
        True,
        True,
        "installed and running"
        + ("" if lingers else "; it stops when you log out (lingering is off)"),
        None if lingers else f"to keep it running after you log out: `{LINGER_FIX}`",
    )


def linger() -> bool:
    """Whether systemd keeps this user's services running after the last logout."""
    user = os.environ.get("USER") or str(os.getuid())
    ran = _run(["loginctl", "show-user", user, "--property=Linger", "--value"])
    return ran.code == 0 and ran.output.strip() == "yes"
