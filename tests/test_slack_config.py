"""`chat.slack` as users write it and read it back: which keys each mode needs, secrets never
shown, the starter file's environment references, the app manifest `config init` prints, and
`doctor` reporting a Slack link that is connected but lacks a scope. No network."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from agentcomms.cli import app, doctor
from agentcomms.cli.checks import Check
from agentcomms.cli.config_cmd import starter_config
from agentcomms.config import Config, SlackConfig
from agentcomms.transports.slack_manifest import BOT_SCOPES, missing_scopes, scope_problem
from tests.support.home import write_config

SECRET = "xoxb-s3cr3t-4242"


def run(*args: str) -> Result:
    return CliRunner().invoke(app, ["config", *args], env={"COLUMNS": "250"})


@pytest.mark.parametrize(
    ("section", "missing"),
    [
        ({}, ["bot_token", "app_token"]),
        ({"bot_token": "x", "app_token": "y"}, []),
        ({"bot_token": "x", "signing_secret": "z"}, ["app_token"]),
        ({"mode": "http", "bot_token": "x"}, ["signing_secret"]),
        ({"mode": "http", "bot_token": "x", "app_token": "y"}, ["signing_secret"]),
        ({"mode": "http", "signing_secret": "z"}, ["bot_token"]),
    ],
)
def test_each_mode_needs_its_own_keys(section: dict[str, Any], missing: list[str]) -> None:
    assert SlackConfig.model_validate(section).missing_credentials() == missing


def test_a_mode_that_is_not_socket_or_http_is_refused_saying_which() -> None:
    with pytest.raises(ValueError, match="'socket' or 'http'"):
        SlackConfig.model_validate({"mode": "websocket"})


def test_secrets_come_from_the_environment_and_are_never_shown(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slack = starter_config()["chat"]["slack"]
    assert slack["bot_token"] == "${SLACK_BOT_TOKEN:-}"
    assert slack["app_token"] == "${SLACK_APP_TOKEN:-}"
    assert slack["signing_secret"] == "${SLACK_SIGNING_SECRET:-}"

    section = {"enabled": True, "bot_token": "${SLACK_BOT}", "mode": "http"}
    write_config(home, {"chat": {"slack": section, "channels": {"slack:C0123": "backend"}}})
    monkeypatch.setenv("SLACK_BOT", SECRET)
    validated = run("validate")
    assert validated.exit_code == 0, validated.output
    assert "chat.slack.signing_secret is not set" in validated.stderr
    assert "chat.slack.mode is http but server.public_url is not set" in validated.stderr
    for shown in (run("show", "--json"), run("show")):
        assert shown.exit_code == 0, shown.output
        assert SECRET not in shown.stdout
    assert json.loads(run("show", "--json").stdout)["chat"]["slack"]["bot_token"] == "***"


def test_init_prints_the_apps_manifest_for_socket_mode_or_the_events_api(home: Path) -> None:
    socket = run("init", "--slack-manifest")
    assert socket.exit_code == 0, socket.output
    manifest = json.loads(socket.stdout)
    settings = manifest["settings"]
    assert settings["socket_mode_enabled"] is True
    assert settings["interactivity"] == {"is_enabled": True}
    assert "request_url" not in settings["event_subscriptions"]
    assert set(settings["event_subscriptions"]["bot_events"]) == {
        "message.channels",
        "message.groups",
        "message.im",
        "message.mpim",
    }
    assert manifest["oauth_config"]["scopes"]["bot"] == list(BOT_SCOPES)
    assert not (home / "config.json").exists()  # it printed; it wrote nothing

    http = json.loads(run("init", "--slack-manifest", "--public-url", "https://a.test/x/").stdout)
    assert http["settings"]["socket_mode_enabled"] is False
    assert http["settings"]["event_subscriptions"]["request_url"] == (
        "https://a.test/x/webhooks/slack/events"
    )
    assert http["settings"]["interactivity"]["request_url"] == (
        "https://a.test/x/webhooks/slack/interactivity"
    )

    plain = run("init", "--slack-manifest", "--public-url", "http://a.test")
    assert plain.exit_code == 1 and "https://" in plain.stderr
    alone = run("init", "--public-url", "https://a.test")
    assert alone.exit_code == 1 and "--slack-manifest" in alone.stderr


@pytest.mark.parametrize(
    ("granted", "missing"),
    [
        (",".join(BOT_SCOPES), []),
        (",".join([*BOT_SCOPES, "users:read"]), []),
        (
            "chat:write, reactions:write",
            [
                "channels:history",
                "groups:history",
                "im:history",
                "mpim:history",
                "files:read",
                "files:write",
            ],
        ),
        (None, list(BOT_SCOPES)),
    ],
)
def test_the_scopes_slack_names_are_checked_against_what_agentcomms_uses(
    granted: str | None, missing: list[str]
) -> None:
    assert missing_scopes(granted) == missing
    problem = scope_problem(granted)
    assert (problem is None) == (not missing)
    for scope in missing:
        assert problem is not None and scope in problem and BOT_SCOPES[scope] in problem


async def test_doctor_reports_a_link_connected_without_a_scope_as_a_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lacking = scope_problem("chat:write")
    status = {
        "providers": [
            {"name": "slack", "status": "connected", "error": lacking},
            {"name": "telegram", "status": "connected"},
        ]
    }

    async def answer(socket: Any, method: str, *args: Any, **kw: Any) -> dict[str, Any]:
        assert method == "status"
        return status

    monkeypatch.setattr("agentcomms.client.call", answer)
    checks: list[Check] = []
    await doctor._check_gateway(Config(), checks)
    found = {c.name: c for c in checks}
    assert found["provider telegram"].ok
    slack = found["provider slack"]
    assert not slack.ok and "reactions:write" in slack.detail
