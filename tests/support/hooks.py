"""An agent's hook run as the agent runs it: ``agentcomms hook KIND`` with the event's JSON on
stdin, in the background (a test's gateway runs in the test's own loop), found by its agent id."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.cli import AGENTCOMMS
from tests.support.stack import Stack
from tests.support.waiting import eventually


def start_hook(
    stack: Stack,
    payload: dict[str, Any],
    agent: str,
    tmp_path: Path,
    kind: str = "claude-code",
    *flags: str,
    socket: Path | None = None,
) -> subprocess.Popen[str]:
    """`flags` follow the kind, as the agent's settings give them (``--remote-approvals``);
    `socket`: the gateway's, unless given (a relay to it)."""
    given = tmp_path / f"payload-{uuid.uuid4().hex[:6]}.json"
    given.write_text(json.dumps(payload))
    with given.open() as stdin:
        return subprocess.Popen(
            [AGENTCOMMS, "hook", kind, *flags],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={
                "PATH": "/usr/bin:/bin",
                "AGENTCOMMS_SOCKET": str(socket or stack.cfg.server.socket()),
                "AGENTCOMMS_AGENT_ID": agent,
            },
        )


def stop_hook(hook: subprocess.Popen[str]) -> None:
    """A hook the test is done with, ended and reaped: one left running (a failed test's)
    would be reported, with its open pipes, against whichever test runs next."""
    hook.kill()
    hook.communicate(timeout=30)


def permission_request(tool_name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    """What Claude Code's PermissionRequest hook reads on stdin for this tool call."""
    return {
        "session_id": "s",
        "hook_event_name": "PermissionRequest",
        "tool_name": tool_name,
        "tool_input": tool_input,
        "permission_suggestions": [],
    }


# What Claude Code offers for "allow for this session" (a permission suggestion for the session).
SESSION_SUGGESTION = {"type": "addDirectories", "directories": ["/p"], "destination": "session"}


async def open_approval(
    stack: Stack, agent: str, *, command: str = "touch done.txt", session: bool = True
) -> str:
    """An approval opened as the agent's PermissionRequest hook opens it, to run `command`,
    offering "allow for this session" when `session`; its id."""
    opened = await stack.call(
        "approval_open",
        kind="claude-code",
        agent_id=agent,
        tool_name="Bash",
        tool_input={"command": command},
        permission_suggestions=[SESSION_SUGGESTION] if session else [],
    )
    return str(opened["id"])


async def open_question(
    stack: Stack,
    agent: str,
    labels: list[str],
    *,
    question: str = "Which checks should run?",
    header: str = "Checks",
    several: bool = True,
) -> str:
    """An approval opened as the agent's PermissionRequest hook opens it for one
    `AskUserQuestion` question with these options (taking several of them when `several`); its
    id."""
    asked = {
        "question": question,
        "header": header,
        "options": [{"label": label, "description": ""} for label in labels],
        "multiSelect": several,
    }
    opened = await stack.call(
        "approval_open",
        kind="claude-code",
        agent_id=agent,
        tool_name="AskUserQuestion",
        tool_input={"questions": [asked]},
    )
    return str(opened["id"])


async def agents_approval(stack: Stack, agent_id: str) -> str | None:
    """The id of an approval `agentcomms approvals` lists for `agent_id` (None: none yet)."""
    rows = (await stack.call("approvals"))["approvals"]
    return next((r["id"] for r in rows if r["agent_id"] == agent_id), None)


async def listed_approval(stack: Stack, approval: str) -> str:
    """`approval`, once `agentcomms approvals` lists it: a call coming in finds the requests
    waiting as that list does, in Temporal's visibility, which may lag a moment behind."""

    async def shown() -> str | None:
        rows = (await stack.call("approvals"))["approvals"]
        return approval if any(r["id"] == approval for r in rows) else None

    return await eventually(shown)


def failing_agentcomms(root: Path) -> list[tuple[str, Path]]:
    """Two agentcomms an agent's hooks may meet: one that crashes (as a Python error ends it:
    exit 1), and one that is gone (a moved virtualenv: 127), by name."""
    crashing = root / "bin" / "agentcomms"
    crashing.parent.mkdir(parents=True)
    crashing.write_text("#!/bin/sh\necho 'Traceback (most recent call last):' >&2\nexit 1\n")
    crashing.chmod(0o755)
    return [("crashing", crashing), ("gone", root / "moved-venv" / "bin" / "agentcomms")]


# Each run's arguments, agent id and pane, a line each, then what it read on stdin.
RECORDER = """#!/bin/sh
out=$(mktemp "{runs}/run.XXXXXX")
{{ printf '%s\\n' "$*" "${{AGENTCOMMS_AGENT_ID:-}}" "${{TMUX_PANE:-}}"; cat; }} > "$out"
"""


def recording_agentcomms(root: Path) -> tuple[Path, Path]:
    """An executable named agentcomms that records each run; it and the runs' folder. Its
    stdin is closed by a hook's runner, and is nothing for a notify (one JSON argument)."""
    runs, bin_dir = root / "runs", root / "bin"
    runs.mkdir(parents=True)
    bin_dir.mkdir()
    exe = bin_dir / "agentcomms"
    exe.write_text(RECORDER.format(runs=runs))
    exe.chmod(0o755)
    return exe, runs


def recorded_runs(runs: Path) -> list[dict[str, Any]]:
    """Each finished run of `recording_agentcomms`: its arguments, agent id and pane, and the
    JSON it read first (a hook's event, or an MCP server's first request)."""
    found = []
    for path in runs.iterdir():
        args, agent_id, pane, payload = [*path.read_text().split("\n", 3), "", "", ""][:4]
        try:
            event, _ = json.JSONDecoder().raw_decode(payload)  # an MCP server reads on
        except json.JSONDecodeError:
            continue  # still being written, or a run that read nothing
        found.append({"args": args, "agent_id": agent_id, "pane": pane, **event})
    return found


@dataclass
class Relay:
    """A socket between a hook and the gateway; the answers it passed back, by method."""

    path: Path
    answers: list[tuple[str, Any]] = field(default_factory=list)


@contextlib.asynccontextmanager
async def gateway_relay(gateway: Path, before: Callable[[str], None]) -> AsyncIterator[Relay]:
    """A socket that passes each hook request (one line, one line of answer) on to `gateway`,
    and its answer back, once `before` was called with the request's method: what happens to
    the agent while its hook is in that request."""

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_writer = None
        try:
            line = await reader.readline()
            method = str(json.loads(line).get("method"))
            before(method)
            up_reader, up_writer = await asyncio.open_unix_connection(str(gateway))
            up_writer.write(line)
            await up_writer.drain()
            answer = await up_reader.readline()
            writer.write(answer)
            await writer.drain()
            found.answers.append((method, json.loads(answer).get("result")))
        except (OSError, ValueError):
            pass  # the hook went away, as the gateway's own socket allows
        finally:
            writer.close()
            if up_writer is not None:
                up_writer.close()

    with tempfile.TemporaryDirectory(prefix="ac-relay-") as folder:  # a socket's path is short
        found = Relay(Path(folder) / "relay.sock")
        server = await asyncio.start_unix_server(relay, str(found.path))
        try:
            yield found
        finally:
            server.close()


def hanging_agentcomms(root: Path) -> Path:
    """An agentcomms that never answers (a stalled gateway socket, a machine too loaded to
    start Python), its wait in a child process as a real one's may be."""
    exe = root / "bin" / "agentcomms"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\nsleep 600\n")
    exe.chmod(0o755)
    return exe
