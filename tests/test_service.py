"""`agentcomms service`: `up` as the user's own service, in a private home and XDG directories.

The service manager here is the real one: `systemd-analyze --user verify` checks the unit, and
`systemctl --user` finds no user manager in the test's empty XDG_RUNTIME_DIR, which is exactly
the case a container or a login without a session bus is in. The real user's services are
never touched: HOME, XDG_CONFIG_HOME and XDG_RUNTIME_DIR are the test's own.
"""

from __future__ import annotations

import json
import logging
import os
import plistlib
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentcomms import user_service
from agentcomms.cli import app
from agentcomms.cli.checks import Check
from agentcomms.cli.doctor import _check_service
from agentcomms.cli.service_cmd import last_lines
from agentcomms.config import LoggingConfig
from agentcomms.logs import setup_logging
from tests.support.cli import AGENTCOMMS, env_for, run


@pytest.fixture
def private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user of our own: home, agentcomms home, XDG config and an empty runtime directory."""
    home = tmp_path / "user"
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    monkeypatch.setenv("AGENTCOMMS_HOME", str(home / ".agentcomms"))
    return home


def verify(unit: Path) -> subprocess.CompletedProcess[str]:
    """`systemd-analyze --user verify`, which warns (exit 0) of a directive it cannot parse."""
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: apt-get install systemd"
    return subprocess.run(
        [analyze, "--user", "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "SYSTEMD_LOG_LEVEL": "notice"},
    )


def spec(tmp_path: Path, argv0: str = AGENTCOMMS) -> user_service.Spec:
    return user_service.Spec(
        argv=(argv0, "up", "--headless"),
        env={"AGENTCOMMS_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
        log_dir=tmp_path / "home" / "logs",
        env_file=tmp_path / "home" / "service.env",
    )


@pytest.mark.parametrize(
    "where",
    [
        "venv/bin",
        # systemd unquotes C escapes and expands %-specifiers, even inside quotes.
        "my venvs/50% done/bin",
    ],
)
def test_the_systemd_unit_verifies_and_runs_this_agentcomms_wherever_it_lives(
    private: Path, tmp_path: Path, where: str
) -> None:
    # The unit names an executable that exists only at this odd path: verify fails with "is not
    # executable" unless the path reached systemd as written.
    binary = tmp_path / where / "agentcomms"
    binary.parent.mkdir(parents=True)
    binary.symlink_to(AGENTCOMMS)
    unit = tmp_path / "agentcomms.service"
    unit.write_text(user_service.systemd_unit(spec(tmp_path, str(binary))))
    checked = verify(unit)
    assert (checked.returncode, checked.stderr) == (0, ""), checked.stderr
    text = unit.read_text()
    for line in ("Restart=on-failure", "WantedBy=default.target", "Type=simple"):
        assert line in text.splitlines()


@pytest.mark.parametrize("where", ['quote"d/bin', "back\\slash/bin", "it's/bin"])
def test_a_path_systemd_cannot_run_is_refused_with_what_to_do(tmp_path: Path, where: str) -> None:
    with pytest.raises(user_service.ServiceError, match="install agentcomms at a path without"):
        user_service.systemd_unit(spec(tmp_path, str(tmp_path / where / "agentcomms")))


def test_a_broken_directive_is_what_verify_catches(private: Path, tmp_path: Path) -> None:
    # The check above means something: systemd only warns of a value it cannot parse.
    broken = user_service.systemd_unit(spec(tmp_path)).replace(
        "Restart=on-failure", "Restart=sometimes"
    )
    unit = tmp_path / "agentcomms.service"
    unit.write_text(broken)
    assert "restart specifier" in verify(unit).stderr


def test_the_launchd_agent_restarts_on_failure_starts_at_login_and_logs(tmp_path: Path) -> None:
    wanted = spec(tmp_path)
    plist = plistlib.loads(user_service.launchd_plist(wanted).encode())
    assert plist["Label"] == user_service.LAUNCHD_LABEL
    assert plist["ProgramArguments"] == [AGENTCOMMS, "up", "--headless"]
    assert plist["RunAtLoad"] is True and plist["KeepAlive"] == {"SuccessfulExit": False}
    assert plist["EnvironmentVariables"] == wanted.env
    assert plist["StandardErrorPath"] == str(tmp_path / "home" / "logs" / "service.out")


def test_install_twice_changes_nothing_and_uninstall_leaves_config_and_data(
    private: Path,
) -> None:
    home = private / ".agentcomms"
    home.mkdir(parents=True)
    (home / "config.json").write_text("{}")
    (home / "agentcomms.db").write_text("data")

    first = user_service.install("systemd")
    unit = private / ".config" / "systemd" / "user" / "agentcomms.service"
    assert first.path == unit and first.changed
    written = unit.stat()
    # No user manager here: said, with what to do, and the unit is written all the same.
    assert any("systemctl --user is not available" in n for n in first.notes), first.notes
    assert any("agentcomms up --headless" in n for n in first.notes)
    assert f"AGENTCOMMS_HOME={home}" in unit.read_text()
    assert (verify(unit).returncode, verify(unit).stderr) == (0, "")

    second = user_service.install("systemd")
    assert not second.changed
    assert unit.stat().st_mtime_ns == written.st_mtime_ns

    found = user_service.status("systemd")
    assert found.installed and found.running is None
    assert "systemctl --user is not available" in found.detail

    gone = user_service.uninstall("systemd")
    assert gone.changed and not unit.exists()
    assert (home / "config.json").read_text() == "{}"
    assert (home / "agentcomms.db").read_text() == "data"
    assert not user_service.uninstall("systemd").changed
    assert not user_service.status("systemd").installed


def test_the_launchd_agent_is_written_where_launchd_reads_it_on_any_system(
    private: Path,
) -> None:
    outcome = user_service.install("launchd")
    assert outcome.path == private / "Library/LaunchAgents/dev.agentcomms.up.plist"
    assert plistlib.loads(outcome.path.read_bytes())["ProgramArguments"][-2:] == [
        "up",
        "--headless",
    ]
    assert not user_service.install("launchd").changed
    if shutil.which("launchctl") is None:
        assert any("launchctl bootstrap" in n for n in outcome.notes), outcome.notes
    assert user_service.uninstall("launchd").changed and not outcome.path.exists()


@pytest.mark.parametrize(
    ("installed", "running", "ok", "warn"),
    [
        (False, None, True, True),  # not installed: a choice, with how to have it
        (True, True, True, False),
        (True, False, False, False),  # installed but stopped: broken
        (True, None, True, True),  # no one can say: worth knowing
    ],
)
def test_doctor_says_whether_the_service_is_installed_and_running(
    monkeypatch: pytest.MonkeyPatch, installed: bool, running: bool | None, ok: bool, warn: bool
) -> None:
    fix = None if running else "do this"
    found = user_service.Status("systemd", Path("/u"), installed, running, "detail", fix)
    monkeypatch.setattr(user_service, "status", lambda: found)
    checks: list[Check] = []
    _check_service(checks)
    assert [(c.name, c.ok, c.warn, c.fix) for c in checks] == [("service", ok, warn, fix)]


def test_status_and_service_status_say_whether_it_is_installed(private: Path) -> None:
    env = env_for(private / ".agentcomms")  # with the private HOME and XDG directories
    before = json.loads(run(env, "status", "--json").stdout)["service"]
    assert before["installed"] is False
    assert "agentcomms service install" in run(env, "status").stdout

    installed = run(env, "service", "install")
    assert installed.returncode == 0, installed.stderr
    assert "installed" in installed.stdout and "systemctl --user" in installed.stdout
    again = run(env, "service", "install")
    assert "unchanged" in again.stdout
    shown = json.loads(run(env, "service", "status", "--json").stdout)
    assert shown["installed"] is True and shown["unit"].endswith("agentcomms.service")
    assert json.loads(run(env, "status", "--json").stdout)["service"]["installed"] is True
    assert run(env, "service", "uninstall").returncode == 0
    assert json.loads(run(env, "service", "status", "--json").stdout)["installed"] is False


def test_up_logs_where_service_logs_reads_them_rotated(
    private: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(user_service, "LOG_MAX_BYTES", 2000)
    log = user_service.default_log_file()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        setup_logging(LoggingConfig(), default_file=log)
        for n in range(200):
            logging.getLogger("agentcomms.test").warning("line %03d of the service's log", n)
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:], root.level = handlers, level
    rotated = sorted(p.name for p in log.parent.iterdir())
    assert rotated == ["agentcomms.log", *(f"agentcomms.log.{n}" for n in range(1, 6))]

    shown = CliRunner().invoke(app, ["service", "logs", "-n", "3"])
    assert shown.exit_code == 0, shown.output
    assert [line.partition(": ")[2] for line in shown.output.splitlines()] == [
        f"line {n} of the service's log" for n in (197, 198, 199)
    ]


@pytest.mark.parametrize(
    ("text", "count", "expected"),
    [
        ("a\nb\nc\n", 2, ["b", "c"]),
        ("a\nb\nc", 5, ["a", "b", "c"]),
        ("a\nb\n", 0, []),
        ("", 3, []),
        # Longer than one read from the end: lines that straddle the block boundary stay whole.
        ("x" * 70_000 + "\n" + "y" * 70_000 + "\nz\n", 2, ["y" * 70_000, "z"]),
    ],
)
def test_logs_shows_the_last_lines(
    tmp_path: Path, text: str, count: int, expected: list[str]
) -> None:
    path = tmp_path / "log"
    path.write_text(text)
    assert last_lines(path, count) == expected


def test_logs_before_any_log_says_what_writes_it(private: Path) -> None:
    shown = CliRunner().invoke(app, ["service", "logs"])
    assert shown.exit_code == 0 and "no log yet" in shown.output
