"""The ``PermissionRequest`` hook waits for the human's answer through agentcomms: a
permission, a question (Claude Code's ``AskUserQuestion``: the answers go back in the tool's
``updatedInput``) or a plan (``ExitPlanMode``: allowed, or denied with the human's reason).

Gemini CLI's is its ``BeforeTool`` hook in remote approvals mode, where a policy rule has
skipped Gemini's own dialog: it always prints Gemini's decision, ``allow``, ``deny`` with the
reason (the model reads it), or ``ask``, which brings Gemini's own dialog back: for agentcomms
down or unreachable, an approval left to the terminal, or anything that went wrong. Silence
there would let the policy's allow run the tool unasked.

Standard library only, like the rest of the hook. It asks the gateway to open an approval, then
long-polls for its decision and prints it in Claude Code's own format: the agent acts on it as on
an answer in its own dialog. **Never keystrokes.** Claude shows its own dialog beside the waiting
hook after a few seconds, and the first answer wins.

- The gateway down or unreachable when asked to open: nothing printed, at once; Claude's own
  dialog stays. Nothing is ever allowed by default.
- The gateway restarted while the hook waits: it connects again and still gets the decision.
- SIGTERM (Esc in the pane, or Claude done with the hook): the approval closes as "answered in
  the terminal", and nothing is printed.
- Gemini CLI cancelled the call (Esc in its pane): Gemini neither signals nor stops the hook
  (measured: same process, same pipes, no signal) and sends no hook event until the next prompt,
  but it writes "Request cancelled." into the session's transcript, whose path its payload
  gives. The hook watches that file while it waits, closes the approval as "canceled in the
  terminal" and answers deny (Gemini has dropped the call: nothing runs whatever it reads).
  Esc has also put Gemini back at its prompt, and no hook of Gemini's says so: the hook reports
  it (``GeminiCancelled``, a report like the others, signed by the gateway), so the agent is
  ready at once and messages waiting for it are typed, rather than when the pane is next read.
"""

from __future__ import annotations

import json
import signal
import socket
import sys
import threading
import time
from types import FrameType
from typing import Any

# Opening must be quick: the agent's own dialog waits behind it.
OPEN_WAIT_S = 3.0
# One long-poll; the gateway answers "open" after it and the hook asks again.
POLL_S = 25.0
# A gateway that is restarting: how often to knock again.
RECONNECT_PAUSE_S = 0.5
# Past the approval's own timeout: time for the workflow to record it.
DEADLINE_MARGIN_S = 30.0
# Claude Code's tools whose own dialog is the human's answer (not a permission to act).
ASKS_THE_HUMAN = ("AskUserQuestion", "ExitPlanMode")
# Gemini CLI's BeforeTool answer that shows its own permission dialog, whatever its policy says.
GEMINI_ASK = {"decision": "ask"}
# What Gemini CLI writes into the session's transcript (an "info" line) when Esc cancels a turn.
GEMINI_CANCELLED = "Request cancelled."
# How often the hook reads Gemini's transcript for that line: the approval should close within
# about a second of Esc, and a stat of one file costs nothing.
CANCEL_WATCH_S = 0.3
# What the approval says once Gemini cancelled the call, and what the hook answers Gemini.
CANCELED_IN_TERMINAL = "canceled in the terminal"
# The report the hook makes of that cancel: Gemini is back at its prompt (the state's rule is
# agentcomms.agents.state's GEMINI_CANCELLED_EVENT, not imported here: pydantic costs the hook).
GEMINI_CANCELLED_EVENT = "GeminiCancelled"


class _Terminated(Exception):
    """SIGTERM: the agent ended the wait (answered or cancelled in its own dialog)."""


def wait_for_decision(
    path: str, params: dict[str, Any], payload: dict[str, Any], transcript_end: int | None = None
) -> None:
    """Open the approval for this request and print its decision, or nothing. `transcript_end`:
    where Gemini's transcript ended when the hook started (None: no transcript then)."""
    tool_name = payload.get("tool_name") or "?"
    given = payload.get("tool_input")
    tool_input: dict[str, Any] = given if isinstance(given, dict) else {}
    suggestions = payload.get("permission_suggestions")
    request = {
        **{k: v for k, v in params.items() if k in ("kind", "agent_id", "pane", "tmux_socket")},
        "tool_name": tool_name,
        "tool_input": tool_input,
        "permission_suggestions": suggestions if isinstance(suggestions, list) else [],
    }
    ids: list[str] = []

    def terminated(signum: int, frame: FrameType | None) -> None:
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, terminated)
    gemini = params.get("kind") == "gemini"
    transcript = payload.get("transcript_path") if gemini else None
    watched = None
    if isinstance(transcript, str) and transcript_end is not None:
        watched = _TranscriptWatch(transcript, transcript_end)
    output: dict[str, Any] | None = None
    try:
        opened = _call(path, "approval_open", request, OPEN_WAIT_S)
        if not isinstance(opened, dict) or not isinstance(opened.get("id"), str):
            return
        listed = opened.get("ids")
        ids = [i for i in listed if isinstance(i, str)] if isinstance(listed, list) else []
        ids = ids or [opened["id"]]
        if watched is not None:
            watched.start(path, ids)
        deadline = time.monotonic() + float(opened.get("timeout_s") or 600) + DEADLINE_MARGIN_S
        # A tool that asks several questions has one approval each: every one must be answered.
        decisions = []
        for approval_id in ids:
            decision = _wait(path, approval_id, deadline)
            if decision is None or decision.get("behavior") == "deny":
                decisions = [decision]
                break
            decisions.append(decision)
        output = _output(tool_name, tool_input, decisions)
        if output is not None and not gemini:
            _print_decision(output)
    except _Terminated:
        for approval_id in ids:
            _answered_in_terminal(path, approval_id)
    except (OSError, ValueError):
        return
    finally:
        signal.signal(signal.SIGTERM, previous)
        if gemini:
            cancelled = watched is not None and watched.cancelled.is_set()
            if cancelled:
                output = {"behavior": "deny", "message": f"The call was {CANCELED_IN_TERMINAL}."}
            print_json(_gemini_decision(output))
            if cancelled:
                _report_cancelled(path, params)


def _gemini_decision(output: dict[str, Any] | None) -> dict[str, Any]:
    """Gemini CLI's BeforeTool answer for the decision in Claude Code's shape."""
    if output is None:
        return GEMINI_ASK
    if output.get("behavior") == "allow":
        return {"decision": "allow"}
    return {"decision": "deny", "reason": str(output.get("message") or "Denied.")}


def _wait(path: str, approval_id: str, deadline: float) -> dict[str, Any] | None:
    """The hook's decision for one approval; None to leave the agent's own dialog."""
    while time.monotonic() < deadline:
        try:
            answer = _call(
                path, "approval_wait", {"id": approval_id, "wait_s": POLL_S}, POLL_S + 10
            )
        except OSError:
            time.sleep(RECONNECT_PAUSE_S)
            continue
        if isinstance(answer, dict) and answer.get("status") == "decided":
            decision = answer.get("decision")
            return decision if isinstance(decision, dict) else None
        if answer is None:  # the gateway refused the question: nothing to wait for
            return None
    return None


def _output(
    tool_name: str, tool_input: dict[str, Any], decisions: list[dict[str, Any] | None]
) -> dict[str, Any] | None:
    """The decision in Claude Code's shape: a question's answers go into the tool's input
    (``answers``, keyed by each question's own text), which is how its dialog answers it."""
    if not decisions or any(d is None for d in decisions):
        return None
    first = decisions[0]
    assert first is not None
    if first.get("behavior") != "allow":
        return first
    answers = [d.get("answer") for d in decisions if d is not None]
    if not any(isinstance(a, str) for a in answers):
        if tool_name in ASKS_THE_HUMAN:
            # Measured: Claude Code takes a hook's allow for a tool whose dialog is the
            # human's answer only with the input that answers it; without, its dialog stays.
            return {**first, "updatedInput": tool_input}
        return first
    questions = [q for q in tool_input.get("questions") or [] if isinstance(q, dict)]
    keyed = {
        str(q.get("question")): a
        for q, a in zip(questions, answers, strict=False)
        if isinstance(a, str)
    }
    return {"behavior": "allow", "updatedInput": {**tool_input, "answers": keyed}}


def _print_decision(decision: dict[str, Any]) -> None:
    print_json({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}})


def print_json(output: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(output) + "\n")
    sys.stdout.flush()


def _answered_in_terminal(path: str, approval_id: str) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut this short
    _close_in_terminal(path, approval_id)


def _close_in_terminal(path: str, approval_id: str, message: str | None = None) -> None:
    """Close the approval as settled in the agent's own terminal (`message`: how), which also
    wakes a wait on it; the gateway gone meanwhile is nothing to report."""
    decision = {"id": approval_id, "behavior": "terminal", "by": "the terminal", "via": "terminal"}
    if message is not None:
        decision["message"] = message
    try:
        _call(path, "approval_decide", decision, OPEN_WAIT_S)
    except (OSError, ValueError):
        pass


def _report_cancelled(path: str, params: dict[str, Any]) -> None:
    """Tell the gateway that Esc put Gemini back at its prompt, through the path of every hook's
    report (the agent named as the call's report named it). Its time is now, after the call's
    own report, so it is the state's last word."""
    report = {**params, "event": GEMINI_CANCELLED_EVENT, "at_ns": time.time_ns(), "payload": {}}
    try:
        _call(path, "agent_hook", report, OPEN_WAIT_S)
    except (OSError, ValueError):
        pass


class _TranscriptWatch:
    """Gemini CLI's session transcript (JSON lines), read from `offset`, where it ended when the
    hook started (before it reported the call): a "Request cancelled." written since means Esc
    dropped the call the hook asks for (the hook's call belongs to the turn, and the turn is
    what Esc cancels)."""

    def __init__(self, path: str, offset: int) -> None:
        self.path = path
        self.offset = offset
        self.cancelled = threading.Event()

    def start(self, socket_path: str, ids: list[str]) -> None:
        watcher = threading.Thread(target=self._watch, args=(socket_path, ids), daemon=True)
        watcher.start()

    def _watch(self, socket_path: str, ids: list[str]) -> None:
        while not self._seen():
            time.sleep(CANCEL_WATCH_S)
        self.cancelled.set()
        for approval_id in ids:
            # Closed like an answer in the terminal, which wakes the hook's own wait.
            _close_in_terminal(socket_path, approval_id, CANCELED_IN_TERMINAL)

    def _seen(self) -> bool:
        """Whether a complete line written since says the turn was cancelled."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                written = f.read()
        except OSError:
            return False
        lines = written.split(b"\n")
        self.offset += len(written) - len(lines[-1])  # a line half written is read again
        for line in lines[:-1]:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if (
                isinstance(record, dict)
                and record.get("type") == "info"
                and record.get("content") == GEMINI_CANCELLED
            ):
                return True
        return False


def _call(path: str, method: str, params: dict[str, Any], wait_s: float) -> Any:
    """One request, its result; None when the gateway answered with an error. Raises OSError
    when the gateway is not there or went away."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(wait_s)
        sock.connect(path)
        sock.sendall(json.dumps({"id": 1, "method": method, "params": params}).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionResetError("the gateway closed the connection")
            data += chunk
    reply = json.loads(data)
    return reply.get("result") if isinstance(reply, dict) else None
