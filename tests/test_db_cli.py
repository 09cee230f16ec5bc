"""``agentcomms db upgrade | info`` as a user runs them."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentcomms.cli import app
from agentcomms.store import Store, head_revision
from tests.support.home import write_config

runner = CliRunner()


def test_upgrade_then_info(database_url: str) -> None:
    before = runner.invoke(app, ["db", "info", "--url", database_url])
    assert before.exit_code == 1, before.output
    assert "none (no tables yet)" in before.stdout
    assert "agentcomms db upgrade" in before.stdout

    for _ in range(2):  # the second run finds nothing to do
        result = runner.invoke(app, ["db", "upgrade", "--url", database_url])
        assert result.exit_code == 0, result.output
        assert f"is at revision {head_revision()}" in result.stdout

    after = runner.invoke(app, ["db", "info", "--url", database_url, "--json"])
    assert after.exit_code == 0, after.output
    assert json.loads(after.stdout) == {
        "url": database_url,
        "revision": head_revision(),
        "expected_revision": head_revision(),
        "up_to_date": True,
    }


def test_upgraded_database_opens_without_migrating(database_url: str) -> None:
    result = runner.invoke(app, ["db", "upgrade", "--url", database_url])
    assert result.exit_code == 0, result.output

    async def open_and_close() -> None:
        store = await Store.open(database_url, migrate=False)  # raises SchemaOutdated if not
        await store.close()

    asyncio.run(open_and_close())


def test_upgrade_defaults_to_the_configured_database(home: Path) -> None:
    result = runner.invoke(app, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    path = home / "agentcomms.db"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert str(path) in result.stdout


def test_upgrade_follows_the_environment_override(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "elsewhere" / "projection.db"
    monkeypatch.setenv("AGENTCOMMS_DATABASE__URL", f"sqlite+aiosqlite:///{path}")
    result = runner.invoke(app, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert path.exists()
    assert not (home / "agentcomms.db").exists()


def test_info_does_not_create_a_missing_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "agentcomms.db"
    result = runner.invoke(app, ["db", "info", "--url", f"sqlite+aiosqlite:///{path}"])
    assert result.exit_code == 1
    assert not path.exists()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not a url", "not a SQLAlchemy URL"),
        ("postgresql+asyncpg://me:s3cret@127.0.0.1:1/agentcomms", "Cannot use the database"),
        ("mysql+nosuchdriver://localhost/x", "Cannot use database URL"),
    ],
)
def test_bad_database_is_one_sentence_on_stderr(home: Path, url: str, message: str) -> None:
    result = runner.invoke(app, ["db", "upgrade", "--url", url])
    assert result.exit_code == 1
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert "s3cret" not in result.output


def test_broken_config_is_one_sentence_on_stderr(home: Path) -> None:
    write_config(home, "{not json")
    result = runner.invoke(app, ["db", "upgrade"])
    assert result.exit_code == 1
    assert "config.json" in result.stderr
    assert "Traceback" not in result.output


def test_agentcomms_db_upgrade_as_a_process(tmp_path: Path) -> None:
    path = tmp_path / "agentcomms.db"
    env = {**os.environ, "AGENTCOMMS_HOME": str(tmp_path / "home")}
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentcomms",
            "db",
            "upgrade",
            "--url",
            f"sqlite+aiosqlite:///{path}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    help_text = subprocess.run(
        [sys.executable, "-m", "agentcomms", "db", "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    ).stdout
    assert "upgrade" in help_text and "info" in help_text
