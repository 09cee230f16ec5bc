"""Reading a few keys of the configuration, as the clients do (`send`, `status`, `mcp`, hooks):
only those keys are expanded and overridden, so a secret only the gateway uses need not be set."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentcomms.config import gateway_socket, load_config, load_sections
from agentcomms.config.reading import temporal_address
from agentcomms.errors import ConfigError
from tests.support.home import write_config

GATEWAY_ONLY = {
    "chat": {"telegram": {"enabled": True, "token": "${ACC_UNSET_TELEGRAM_TOKEN}"}},
    "security": {"deployment_key": "${ACC_UNSET_DEPLOYMENT_KEY}"},
    "voice": {"phone": {"auth_token": "${ACC_UNSET_TWILIO_TOKEN}"}},
}


def test_the_socket_defaults_to_the_home(home: Path) -> None:
    assert gateway_socket() == home / "daemon.sock"
    assert temporal_address() == "127.0.0.1:7233"
    assert not home.exists()  # reading never creates the home


def test_the_socket_is_read_whatever_the_gateways_secrets(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACC_SOCKETS", str(tmp_path))
    write_config(
        home,
        {
            "server": {"socket_path": "${ACC_SOCKETS}/gw.sock", "//": "a comment"},
            "temporal": {"address": "temporal.internal:7233", "api_key": "${ACC_UNSET_KEY}"},
            **GATEWAY_ONLY,
        },
    )
    assert gateway_socket() == tmp_path / "gw.sock"
    assert temporal_address() == "temporal.internal:7233"
    with pytest.raises(ConfigError) as whole:  # the gateway's reader still refuses
        load_config()
    assert "chat.telegram.token: environment variable ACC_UNSET_TELEGRAM_TOKEN" in str(whole.value)


def test_overrides_of_the_socket_apply_and_others_do_not_matter(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(home, {"server": {"socket_path": "/nowhere/gw.sock"}, **GATEWAY_ONLY})
    monkeypatch.setenv("AGENTCOMMS_CHAT__TELEGRAM__TOKEN", "")  # not this reader's key
    monkeypatch.setenv("AGENTCOMMS_SERVER__SOCKET_PATH", "007")  # text, not the number 7
    assert gateway_socket() == Path("007")
    monkeypatch.delenv("AGENTCOMMS_SERVER__SOCKET_PATH")
    monkeypatch.setenv("AGENTCOMMS_SERVER", f'{{"socket_path": "{tmp_path}/a.sock"}}')
    assert gateway_socket() == tmp_path / "a.sock"
    monkeypatch.setenv("AGENTCALL_SERVER__SOCKET_PATH", "/legacy.sock")  # older, loses
    monkeypatch.setenv("AGENTCOMMS_SERVER__SOCKET_PATH", f"{tmp_path}/b.sock")
    assert gateway_socket() == tmp_path / "b.sock"


def test_mistakes_in_the_keys_read_are_still_reported(home: Path) -> None:
    write_config(home, {"server": {"socket_path": "${ACC_UNSET_SOCKET}"}})
    with pytest.raises(ConfigError, match=r"server\.socket_path: environment variable ACC_UNSET_"):
        gateway_socket()
    write_config(home, {"server": {"socket_path": 5}})
    with pytest.raises(ConfigError, match=r"server\.socket_path: expected a file path"):
        gateway_socket()
    write_config(home, '{"server": {')
    with pytest.raises(ConfigError, match="invalid JSON"):
        gateway_socket()
    (home / "config.json").write_text("{}")
    (home / "config.json").chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600"):  # it may hold secrets, whoever reads it
        gateway_socket()


def test_sections_are_validated_alone(home: Path, tmp_path: Path) -> None:
    write_config(
        home,
        {
            "server": {"socket_path": str(tmp_path / "gw.sock")},
            "logging": {"level": "DEBUG"},
            **GATEWAY_ONLY,
        },
    )
    cfg = load_sections(["server", "logging"])
    assert cfg.server.socket() == tmp_path / "gw.sock" and cfg.logging.level == "DEBUG"
    assert cfg.chat.telegram.token is None  # not read: its default
    with pytest.raises(ConfigError, match=r"chat\.telegram\.token: environment variable"):
        load_sections(["chat"])
    write_config(home, {"server": {"http_port": "many"}})
    with pytest.raises(ConfigError, match=r"server\.http_port"):
        load_sections(["server"])


def test_reading_the_socket_loads_no_schema(home: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from agentcomms.config import gateway_socket; gateway_socket(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'typer')))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]", done.stdout
