"""``agentcomms config init | validate | show``, in process and as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from agentcomms.cli import app
from agentcomms.cli.config_cmd import starter_config
from agentcomms.config import Config, load_config
from tests.support.cli import AGENTCOMMS
from tests.support.home import mode, write_config
from tests.support.tmux import Tmux

SECRET = "s3cr3t-Value-4242"


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    # Wide, so a table row is never wrapped in the middle of what a test looks for.
    return CliRunner().invoke(app, ["config", *args], env={"COLUMNS": "250", **(env or {})})


def leaves(value: Any, loc: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    if isinstance(value, dict) and value:
        return {leaf for k, v in value.items() for leaf in leaves(v, (*loc, k))}
    return {loc}


# --- init ---------------------------------------------------------------------------------------


def test_init_writes_a_private_file_in_a_private_home(home: Path) -> None:
    result = run("init")
    assert result.exit_code == 0, result.output
    path = home / "config.json"
    assert (mode(home), mode(path)) == (0o700, 0o600)
    assert f"Wrote {path}" in result.stdout
    assert "agentcomms config validate" in result.stdout  # next steps
    assert load_config() == Config()  # the starter file means the defaults


def test_init_refuses_to_overwrite_and_force_does(home: Path) -> None:
    path = write_config(home, {"temporal": {"namespace": "mine"}})
    result = run("init")
    assert result.exit_code == 1
    assert "already exists; pass --force" in result.stderr
    assert json.loads(path.read_text()) == {"temporal": {"namespace": "mine"}}

    path.chmod(0o644)
    result = run("init", "--force")
    assert result.exit_code == 0, result.output
    assert mode(path) == 0o600
    assert "temporal" in json.loads(path.read_text())
    assert load_config().temporal.namespace == "default"


def test_init_output_creates_missing_directories_private(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "agentcomms.json"
    result = run("init", "-o", str(path), "--minimal")
    assert result.exit_code == 0, result.output
    assert (mode(path.parent), mode(path)) == (0o700, 0o600)
    assert f"agentcomms config validate -c {path}" in result.stdout
    assert not home.exists()  # -o writes only there


def test_minimal_config_is_small_offline_and_valid(home: Path) -> None:
    assert run("init", "--minimal").exit_code == 0
    data = json.loads((home / "config.json").read_text())
    assert set(data) - {"//"} == {"temporal", "chat", "agents"}
    assert "${" not in json.dumps(data)  # needs no account and no variable
    config = load_config()
    assert config.chat.local.enabled and config.temporal.embedded
    assert not (config.chat.telegram.enabled or config.chat.discord.enabled)


def test_full_starter_has_every_key_and_no_literal_secret(home: Path) -> None:
    data = starter_config()
    defaults = Config().model_dump(mode="json")
    without_comments = json.loads(
        json.dumps(data),
        object_hook=lambda o: {k: v for k, v in o.items() if not k.startswith("//")},
    )
    assert leaves(without_comments) == leaves(defaults)  # every section, every key
    telegram = data["chat"]["telegram"]
    assert telegram["token"] == "${TELEGRAM_BOT_TOKEN:-}"
    assert data["voice"]["elevenlabs"]["api_key"] == "${ELEVENLABS_API_KEY:-}"
    assert data["voice"]["deepgram"]["api_key"] == "${DEEPGRAM_API_KEY:-}"
    assert all("//" in data[s] for s in ("server", "temporal", "chat", "voice"))


def test_full_starter_reads_secrets_from_the_environment(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run("init").exit_code == 0
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", SECRET)
    monkeypatch.setenv("TWILIO_AUTH_TOKEN", "tw")
    config = load_config()
    assert config.chat.telegram.token is not None
    assert config.chat.telegram.token.get_secret_value() == SECRET
    assert config.voice.phone.auth_token is not None
    assert config.voice.phone.auth_token.get_secret_value() == "tw"
    assert config.chat.discord.token is None  # its variable is unset: not configured
    assert SECRET not in (home / "config.json").read_text()


# --- validate -----------------------------------------------------------------------------------


def test_validate_ok_prints_the_path_and_a_summary(home: Path) -> None:
    path = write_config(home, {"agents": {"backend": {"target": "dev:0.1"}}})
    result = run("validate", env={"AGENTCOMMS_TEMPORAL__ADDRESS": "h:7233"})
    assert result.exit_code == 0, result.output
    ok, summary = result.stdout.splitlines()
    assert ok == f"OK: {path}"
    assert "agents: backend" in summary
    assert "chat: local" in summary
    assert "temporal h:7233" in summary
    assert "1 environment override" in summary


def test_validate_without_a_file_is_ok_with_defaults(home: Path) -> None:
    result = run("validate")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"OK: {home / 'config.json'} (no such file: defaults apply")


def test_validate_lists_every_problem_and_exits_1(home: Path) -> None:
    path = write_config(
        home, {"temporal": {"ui_port": "abc", "adress": "x"}, "chat": {"telegram": {"token": 4242}}}
    )
    result = run("validate")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert f'{path}: temporal.ui_port: expected an integer, got "abc"' in result.stderr
    assert "temporal.adress: unknown key (did you mean 'address'?)" in result.stderr
    assert "chat.telegram.token: expected a string, got a number (value hidden)" in result.stderr
    assert "4242" not in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_validate_warns_about_an_enabled_provider_without_credentials(home: Path) -> None:
    write_config(home, {"chat": {"telegram": {"enabled": True, "token": "${TG:-}"}}})
    result = run("validate", env={"AGENTCOMMS_DATABASE_URL": "x"})
    assert result.exit_code == 0
    assert "chat.telegram is enabled but chat.telegram.token is not set" in result.stderr
    assert "AGENTCOMMS_DATABASE_URL is ignored" in result.stderr


def test_validate_says_what_the_whatsapp_cloud_webhook_lacks_and_show_hides_its_secrets(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cloud = {
        "enabled": True,
        "api": "cloud",
        "access_token": "${WA_TOKEN}",
        "phone_number_id": "106540352242922",
    }
    write_config(home, {"chat": {"whatsapp": cloud}})
    monkeypatch.setenv("WA_TOKEN", SECRET)
    result = run("validate")
    assert result.exit_code == 0, result.output
    for key in ("chat.whatsapp.app_secret", "chat.whatsapp.verify_token", "server.public_url"):
        assert key in result.stderr
    assert "account_sid" not in result.stderr  # Twilio's keys are not asked for
    shown = run("show", "--json")
    assert SECRET not in shown.stdout
    assert json.loads(shown.stdout)["chat"]["whatsapp"]["access_token"] == "***"


def test_validate_explicit_path(home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    result = run("validate", "-c", str(missing))
    assert result.exit_code == 1
    assert f"{missing} does not exist" in result.stderr


# --- show ---------------------------------------------------------------------------------------


def show_fixture(home: Path) -> dict[str, str]:
    write_config(
        home,
        {
            "chat": {"telegram": {"enabled": True, "token": "${TG}"}},
            "database": {"url": "postgresql+asyncpg://bob:${PGPASS}@db/agentcomms"},
            "agents": {"backend": {"target": "dev:0.1", "token": SECRET}},
        },
    )
    return {
        "TG": SECRET,
        "PGPASS": SECRET,
        "AGENTCOMMS_VOICE__TTS__API_KEY": SECRET,
        "AGENTCOMMS_TEMPORAL__UI_PORT": "9999",
    }


def test_show_json_is_the_effective_config_with_secrets_redacted(home: Path) -> None:
    result = run("show", "--json", env=show_fixture(home))
    assert result.exit_code == 0, result.output
    assert SECRET not in result.stdout
    data = json.loads(result.stdout)
    assert data["temporal"]["ui_port"] == 9999  # env override
    assert data["temporal"]["address"] == "127.0.0.1:7233"  # default
    assert data["chat"]["telegram"] == {
        "enabled": True,
        "token": "***",
        "base_url": None,
        "mode": "polling",
        "webhook_secret": None,
    }
    assert data["voice"]["tts"]["api_key"] == "***"
    assert data["agents"]["backend"]["token"] == "***"
    assert data["database"]["url"] == "postgresql+asyncpg://bob:***@db/agentcomms"
    assert data["chat"]["discord"]["token"] is None  # unset stays null


def test_show_table_redacts_and_says_where_each_value_came_from(home: Path) -> None:
    result = run("show", env=show_fixture(home))
    assert result.exit_code == 0, result.output
    assert SECRET not in result.stdout
    rows = {
        cells[0]: cells[1:]
        for line in result.stdout.splitlines()
        if len(cells := [c.strip() for c in line.strip("│ ").split("│")]) == 3
    }
    assert rows["chat.telegram.token"] == ['"***"', "file"]
    assert rows["voice.tts.api_key"] == ['"***"', "env AGENTCOMMS_VOICE__TTS__API_KEY"]
    assert rows["temporal.ui_port"] == ["9999", "env AGENTCOMMS_TEMPORAL__UI_PORT"]
    assert rows["temporal.address"] == ['"127.0.0.1:7233"', "default"]
    assert rows["chat.discord.token"] == ["null", "default"]
    assert rows["agents.backend.target"] == ['"dev:0.1"', "file"]


def test_show_refuses_a_readable_file(home: Path) -> None:
    path = write_config(home, {})
    path.chmod(0o644)
    result = run("show")
    assert result.exit_code == 1
    assert f"chmod 600 {path}" in result.stderr


def test_help_teaches_the_file_the_references_and_the_overrides(home: Path) -> None:
    text = run("--help").stdout
    for needle in (
        "~/.agentcomms/config.json",
        "AGENTCOMMS_HOME",
        "${VAR:-default}",
        "$${",
        "AGENTCOMMS_TEMPORAL__ADDRESS=host:7233",
        "AGENTCALL_",
    ):
        assert needle in text, needle


# --- The real command, in a subprocess -----------------------------------------------------------


def cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTCOMMS_", "AGENTCALL_"))}
    return subprocess.run(
        [AGENTCOMMS, "config", *args],
        env={**clean, "AGENTCOMMS_HOME": str(home), "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_end_to_end_init_validate_show(home: Path) -> None:
    init = cli(home, "init")
    assert init.returncode == 0, init.stderr
    assert (mode(home), mode(home / "config.json")) == (0o700, 0o600)

    validate = cli(home, "validate", TELEGRAM_BOT_TOKEN=SECRET)
    assert validate.returncode == 0, validate.stderr
    assert validate.stdout.startswith(f"OK: {home / 'config.json'}\n")

    show = cli(
        home,
        "show",
        "--json",
        TELEGRAM_BOT_TOKEN=SECRET,
        AGENTCOMMS_AGENTS__BACKEND__TARGET="dev:0.1",
    )
    assert show.returncode == 0, show.stderr
    data = json.loads(show.stdout)
    assert data["chat"]["telegram"]["token"] == "***"
    assert data["agents"] == {
        "backend": {
            "type": "tmux",
            "target": "dev:0.1",
            "acp": None,
            "socket": None,
            "host": None,
            "interrupt_key": "C-c",
            "submit_delay_ms": 150,
            "deliver": "when-ready",
            "max_chars": 100_000,
            "max_pending": None,
            "max_pending_bytes": None,
            "token": None,
            "approvals": {"on_timeout": None, "never": [], "remote": False},
            "approvers": None,
            "mirror": "replies",
            "escalation": None,
            "quiet_hours": None,
            "never_sleep": False,
            "budget": None,
        }
    }
    assert SECRET not in show.stdout + show.stderr


@pytest.mark.parametrize(
    ("text", "file_mode", "env", "expected"),
    [
        ("{}", 0o644, {}, "chmod 600"),
        ('{"temporal": {\n  "address": "x",\n}}', 0o600, {}, "invalid JSON at line 3, column 1"),
        ('{"temporal": {"ui_port": "abc"}}', 0o600, {}, "temporal.ui_port: expected an integer"),
        ('{"chat": {"telegram": {"tokn": "x"}}}', 0o600, {}, "chat.telegram.tokn: unknown key"),
        ('{"chat": {"telegram": {"token": "${TG}"}}}', 0o600, {}, "variable TG is not set"),
        ('{"chat": {"telegram": {"token": 4242}}}', 0o600, {}, "value hidden"),
        ("{}", 0o600, {"AGENTCOMMS_TEMPORAL__UI_PORT": "[1]"}, "AGENTCOMMS_TEMPORAL__UI_PORT: "),
    ],
)
def test_mistakes_are_one_message_and_no_traceback(
    home: Path, text: str, file_mode: int, env: dict[str, str], expected: str
) -> None:
    write_config(home, text).chmod(file_mode)
    for command in ("validate", "show"):
        result = cli(home, command, **env)
        assert result.returncode == 1
        assert result.stdout == ""
        assert expected in result.stderr
        assert result.stderr.startswith("error: ")
        assert "Traceback" not in result.stderr
        assert "4242" not in result.stderr


def test_a_pane_agents_socket_is_a_tmux_l_name_or_a_path_and_a_server_not_running_is_named(
    home: Path, tmux: Tmux, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The config takes the server as the command line does (one resolver): `newcomer` as
    `tmux -L newcomer` means it, a path as `tmux -S`; validate names the one not running."""
    running = Path(tmux.socket)
    tmux.new_session("work")
    monkeypatch.setenv("TMUX_TMPDIR", str(running.parent / "tmpdir"))
    named = running.parent / "tmpdir" / f"tmux-{os.getuid()}" / "newcomer"
    write_config(
        home,
        {
            "agents": {
                "by-name": {"target": "dev:0.0", "socket": "newcomer"},
                "by-path": {"target": "work:0.0", "socket": str(running)},
            }
        },
    )
    config = load_config()
    assert config.agents["by-name"].socket == str(named)
    assert config.agents["by-path"].socket == str(running)
    result = run("validate")
    assert result.exit_code == 0
    assert result.stderr.count("warning: agents.") == 1  # the server that runs is not named
    assert f"agents.by-name.socket: no tmux server is running at {named}" in result.stderr
