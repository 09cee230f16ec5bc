"""`agentcomms hook`: silent and harmless when the gateway is not there, and it finds the socket
by the rule the other commands use."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agentcomms.agents import hook
from tests.support.cli import AGENTCOMMS


def test_with_the_gateway_down_the_hook_exits_0_and_prints_nothing(tmp_path: Path) -> None:
    payload = {"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash"}
    done = subprocess.run(
        [AGENTCOMMS, "hook", "claude-code"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env={
            "PATH": "/usr/bin:/bin",
            "AGENTCOMMS_HOME": str(tmp_path),
            "AGENTCOMMS_AGENT_ID": "backend",
        },
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_a_hook_with_nothing_to_report_says_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert hook.main(["claude-code", "not json"]) == 0
    assert hook.main(["claude-code", json.dumps({"no": "event"})]) == 0
    assert capsys.readouterr().out == ""
    assert hook.main(["claude"]) == 0  # a wrong kind is said on stderr, never to the agent
    said = capsys.readouterr()
    assert said.out == "" and "claude-code, codex, gemini" in said.err


def test_the_socket_is_found_as_the_other_commands_find_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AGENTCOMMS_SOCKET", "AGENTCOMMS_SERVER__SOCKET_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AGENTCOMMS_HOME", str(tmp_path))
    assert hook.socket_path() == str(tmp_path / "daemon.sock")
    (tmp_path / "config.json").write_text(json.dumps({"server": {"socket_path": "/run/ac.sock"}}))
    assert hook.socket_path() == "/run/ac.sock"
    monkeypatch.setenv("AGENTCOMMS_SERVER__SOCKET_PATH", "/run/env.sock")
    assert hook.socket_path() == "/run/env.sock"


def test_the_hook_sends_what_the_state_needs_and_no_more() -> None:
    payload = {
        "session_id": "s",
        "hook_event_name": "PreToolUse",
        "transcript_path": "/home/me/.claude/projects/x.jsonl",
        "tool_name": "Write",
        "tool_input": {"file_path": "/tmp/a", "content": "x" * 100_000},
        "tool_response": {"huge": "y" * 100_000},
    }
    sent = hook.trimmed(payload)
    assert set(sent) == {"session_id", "tool_name", "tool_input"}
    assert sent["tool_input"]["file_path"] == "/tmp/a"
    assert len(sent["tool_input"]["content"]) == hook.SENT_STRING_CHARS
