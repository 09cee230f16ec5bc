"""``agentcomms hook <kind>``: what an agent's hooks run, to tell the gateway what the agent does.

It runs around every tool call, inside the agent's loop, so it costs the agent as little as a
process can: the standard library only (no pydantic, no configuration models), one JSON line to
the gateway's socket, at most about a second waiting for the answer, and nothing printed. With
the gateway down it exits 0 at once, and the agent behaves as if agentcomms were not installed.
The exceptions wait for the human's answer and print it (:mod:`agentcomms.agents.hook_approval`):
``PermissionRequest`` (Claude Code's and Codex's, which read the same decision), and Gemini CLI's
``BeforeTool`` in remote approvals mode (``--remote-approvals``), which is its permission request.
A call on the never-list (``--never RULE``, :mod:`agentcomms.agents.never`) is refused at once
instead, by ``PreToolUse`` (Gemini CLI: ``BeforeTool``), and reported as any other call.

The agent is found by ``AGENTCOMMS_AGENT_ID``, else by the pane the hook runs in (``$TMUX_PANE``
on the tmux server named by ``$TMUX``), which the gateway matches against the registrations.

Claude Code, Codex and Gemini CLI pass the hook's JSON on stdin; Codex's ``notify`` passes it as
the last argument instead.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

# Not `from typing import …`: typing costs a hook process 5 to 6 ms of CPU at start, twice around
# every tool call, and the annotations here are never evaluated (mypy reads this name as True).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

KINDS = ("claude-code", "codex", "gemini")
# How long the hook waits for the gateway's answer: a report needs none to be useful.
REPLY_WAIT_S = 1.0
# What the hook sends of a tool's input: the gateway keeps a short summary, never the content.
SENT_STRING_CHARS = 500
SENT_PROMPT_CHARS = 4_000
# A turn's last words, which go back to the chat that started the turn.
SENT_REPLY_CHARS = 16_000
# Fields the state needs, and the turn's reply or error; the rest of a payload (transcripts, tool
# responses) stays here.
SENT_FIELDS = (
    "session_id",
    "thread-id",  # Codex's notify: the thread whose turn ended
    "tool_name",
    "tool_input",
    "notification_type",
    "prompt",
    "type",
    "last_assistant_message",
    "prompt_response",
    "error",
    "error_details",
)


def main(argv: list[str]) -> int:
    """`argv`: the arguments after ``hook``: the agent kind, then ``--never RULE`` for each
    never-listed call, then (Codex ``notify``) the JSON. Always 0, and nothing on stdout but a
    decision: the human's, or the never-list's refusal (the agent reads a hook's output as its
    answer)."""
    at_ns = time.time_ns()  # first: the order of the agent's events is the order hooks start
    if not argv or argv[0] not in KINDS:
        sys.stderr.write(f"agentcomms hook: name the agent kind, one of {', '.join(KINDS)}\n")
        return 0
    remote = "--remote-approvals" in argv[1:]
    never, rest = _never_rules([a for a in argv[1:] if a != "--remote-approvals"])
    payload = _payload(rest)
    if payload is None:
        return 0
    event = payload.get("hook_event_name") or payload.get("type")
    if not isinstance(event, str) or not event:
        return 0
    # Where Gemini's transcript ends as the hook starts, before it reports the call (up to a
    # second): an Esc while it reports is one to watch for as much as an Esc while it waits.
    transcript_end = _file_end(payload.get("transcript_path")) if remote else None
    refused = None
    if never and event in ("PreToolUse", "BeforeTool"):
        from agentcomms.agents.never import decide

        # Claude Code runs never-list handlers of their own (beside the report): one per tool
        # its patterned rules name, for each call of it, and one per rule naming a tool alone,
        # for the calls its "if" matched; Codex's one PreToolUse hook and Gemini CLI's
        # BeforeTool hook report and refuse.
        claude = argv[0] == "claude-code"
        refused = decide(argv[0], never, payload, matched_by_agent=claude)
        if refused is not None:
            sys.stdout.write(json.dumps(refused) + "\n")
            sys.stdout.flush()
        if claude:
            return 0
    if remote and argv[0] == "gemini" and event == "BeforeTool" and refused is None:
        event = "PermissionRequest"  # asked through agentcomms: the agent waits on the human
    params: dict[str, Any] = {
        "kind": argv[0],
        "event": event,
        "at_ns": at_ns,
        "payload": trimmed(payload),
    }
    if isinstance(payload.get("session_id"), str):
        params["session_id"] = payload["session_id"]
    agent_id = os.environ.get("AGENTCOMMS_AGENT_ID")
    if agent_id:
        params["agent_id"] = agent_id
    else:
        pane = os.environ.get("TMUX_PANE")
        tmux = os.environ.get("TMUX")
        if not pane or not tmux:
            if event == "PermissionRequest" and argv[0] == "gemini":
                _leave_to_gemini()  # no agent to ask for: Gemini's own dialog asks
            return 0  # not in tmux and not named: no agent to report for
        params["pane"] = pane
        params["tmux_socket"] = tmux.split(",", 1)[0]
    _send({"id": 1, "method": "agent_hook", "params": params})
    if event == "PermissionRequest":
        # The one hook whose output matters: it waits for the human's answer through agentcomms.
        from agentcomms.agents.hook_approval import wait_for_decision

        wait_for_decision(socket_path(), params, payload, transcript_end)
    return 0


def _file_end(path: Any) -> int | None:
    """The size of the file at `path`; None when there is none."""
    try:
        return os.path.getsize(path) if isinstance(path, str) else None
    except OSError:
        return None


def _leave_to_gemini() -> None:
    from agentcomms.agents.hook_approval import GEMINI_ASK, print_json

    print_json(GEMINI_ASK)


def socket_path() -> str:
    """The gateway's socket, by the rule the other commands use: the configured
    ``server.socket_path`` (environment, then the config file), else ``<home>/daemon.sock``."""
    explicit = os.environ.get("AGENTCOMMS_SOCKET") or os.environ.get(
        "AGENTCOMMS_SERVER__SOCKET_PATH"
    )
    if explicit:
        return os.path.expanduser(explicit)
    home = os.path.expanduser(os.environ.get("AGENTCOMMS_HOME") or "~/.agentcomms")
    try:
        with open(os.path.join(home, "config.json"), encoding="utf-8") as f:
            configured = json.load(f).get("server", {}).get("socket_path")
    except (OSError, ValueError, AttributeError):
        configured = None
    if isinstance(configured, str) and configured:
        return os.path.expanduser(configured)
    return os.path.join(home, "daemon.sock")


def _never_rules(args: list[str]) -> tuple[list[str], list[str]]:
    """The ``--never RULE`` pairs, and the arguments left."""
    rules: list[str] = []
    rest: list[str] = []
    given = iter(args)
    for arg in given:
        if arg == "--never":
            rule = next(given, None)
            if rule:
                rules.append(rule)
        else:
            rest.append(arg)
    return rules, rest


def _payload(rest: list[str]) -> dict[str, Any] | None:
    try:
        raw = rest[-1] if rest else sys.stdin.read()
        data = json.loads(raw)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def trimmed(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload's fields the state needs, long strings cut: never files or transcripts."""
    kept: dict[str, Any] = {}
    for key in SENT_FIELDS:
        if key not in payload:
            continue
        value = payload[key]
        if key == "prompt" and isinstance(value, str):
            kept[key] = value[:SENT_PROMPT_CHARS]
        elif key in ("last_assistant_message", "prompt_response") and isinstance(value, str):
            kept[key] = value[:SENT_REPLY_CHARS]
        elif key == "tool_input" and isinstance(value, dict):
            kept[key] = {k: _short(v) for k, v in list(value.items())[:20]}
        else:
            kept[key] = _short(value)
    return kept


def _short(value: Any) -> Any:
    if isinstance(value, str):
        return value[:SENT_STRING_CHARS]
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    if isinstance(value, list):
        return [_short(v) for v in value[:4]]
    if isinstance(value, dict):
        return {str(k): _short(v) for k, v in list(value.items())[:10]}
    return None


def _send(request: dict[str, Any]) -> None:
    """One line to the gateway and, briefly, its answer; silence when it is not there."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(REPLY_WAIT_S)
            sock.connect(socket_path())
            sock.sendall(json.dumps(request).encode("utf-8") + b"\n")
            sock.recv(65536)
    except (OSError, ValueError):
        pass
