"""The agent's state machine, in plain Python: what each hook means, and order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentcomms.agents import hook_approval
from agentcomms.agents.state import (
    GEMINI_CANCELLED_EVENT,
    STALE_AFTER,
    HookReport,
    Readiness,
    apply,
    beside_its_turn,
    may_type,
    report_from,
    submitted,
    typed,
)

T0 = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)


def hook(event: str, at_ns: int, **payload: object) -> HookReport:
    return report_from("claude-code", event, at_ns, "s1", dict(payload))


def run(*reports: HookReport, start: Readiness | None = None) -> Readiness:
    r = start or Readiness()
    for i, report in enumerate(reports):
        r = apply(r, report, T0 + timedelta(seconds=i)) or r
    return r


def test_a_turn_goes_ready_busy_ready() -> None:
    r = run(hook("SessionStart", 1))
    assert r.state == "ready"
    r = run(hook("UserPromptSubmit", 2, prompt="please run ls"), start=r)
    assert r.state == "busy"
    r = run(hook("Stop", 3), start=r)
    assert r.state == "ready"
    assert r.event == "Stop"


def test_a_permission_request_says_for_which_tool() -> None:
    r = run(
        hook("UserPromptSubmit", 1, prompt="x"),
        hook("PermissionRequest", 3, tool_name="Bash", tool_input={"command": "touch f"}),
    )
    assert r.state == "waiting"
    assert r.waiting_for == "permission for Bash: touch f"
    assert r.describe() == "waiting (permission for Bash: touch f)"


def test_a_concurrent_pre_tool_use_that_finishes_late_does_not_undo_the_dialog() -> None:
    r = run(
        hook("PermissionRequest", 20, tool_name="Bash", tool_input={"command": "ls /"}),
        hook("PreToolUse", 10, tool_name="Bash", tool_input={"command": "ls /"}),
    )
    assert r.state == "waiting"


def test_a_permission_request_that_arrives_after_its_notification_still_names_the_tool() -> None:
    """Its hook started first, but reports only after the dialog's Notification was applied."""
    r = run(
        hook("PreToolUse", 10, tool_name="Bash", tool_input={"command": "touch gate.txt"}),
        hook("Notification", 30, notification_type="permission_prompt"),
        hook("PermissionRequest", 20, tool_name="Bash", tool_input={"command": "touch gate.txt"}),
    )
    assert (r.state, r.waiting_for) == ("waiting", "permission for Bash: touch gate.txt")
    # A late one never opens a dialog the state does not show.
    late = run(
        hook("Stop", 30),
        hook("PermissionRequest", 20, tool_name="Bash", tool_input={"command": "ls"}),
    )
    assert (late.state, late.waiting_for) == ("ready", None)


def test_a_late_hook_of_an_old_session_never_moves_the_state_back() -> None:
    r = run(
        report_from("claude-code", "SessionStart", 50, "new", {}),
        report_from("claude-code", "UserPromptSubmit", 40, "old", {"prompt": "old"}),
    )
    assert r.state == "ready"
    assert r.session_id == "new"


def test_questions_and_plans_and_notifications() -> None:
    question = {"questions": [{"question": "Which colour?", "header": "Colour", "options": []}]}
    r = run(hook("PermissionRequest", 1, tool_name="AskUserQuestion", tool_input=question))
    assert r.waiting_for == "a question: Which colour?"
    assert run(hook("PermissionRequest", 1, tool_name="ExitPlanMode")).waiting_for == (
        "plan approval"
    )
    # The permission notification comes seconds after the request: it keeps what was known.
    r = run(hook("Notification", 2, notification_type="permission_prompt"), start=r)
    assert r.waiting_for == "a question: Which colour?"
    assert run(hook("Notification", 1, notification_type="idle_prompt")).state == "ready"
    assert run(hook("Notification", 1, notification_type="auth_success")).state == "unknown"


def test_session_end_is_offline_and_other_agents_speak_their_own_words() -> None:
    assert run(hook("SessionEnd", 1)).state == "offline"
    gemini = [report_from("gemini", "BeforeAgent", 1, None, {})]
    assert run(*gemini).state == "busy"
    assert run(*gemini, report_from("gemini", "AfterAgent", 2, None, {})).state == "ready"
    codex = report_from("codex", "agent-turn-complete", 3, None, {})
    assert run(report_from("codex", "UserPromptSubmit", 1, None, {}), codex).state == "ready"


def test_geminis_cancel_read_by_its_asking_hook_is_ready() -> None:
    """Esc during a remote approval: the hook that waited reports Gemini back at its prompt, in
    the event name the state knows (the hook keeps its own copy: it must not import pydantic)."""
    asked = report_from("gemini", "PermissionRequest", 1, "s1", {"tool_name": "run_shell_command"})
    assert run(asked).state == "waiting"
    cancelled = report_from("gemini", hook_approval.GEMINI_CANCELLED_EVENT, 2, "s1", {})
    assert run(asked, cancelled).state == "ready"
    assert hook_approval.GEMINI_CANCELLED_EVENT == GEMINI_CANCELLED_EVENT
    # Claude Code's and Codex's hooks never send it: it means nothing from them.
    assert run(hook("PreToolUse", 1), hook(GEMINI_CANCELLED_EVENT, 2)).state == "busy"


def test_since_is_kept_while_the_state_stays() -> None:
    r = run(hook("UserPromptSubmit", 1), hook("PreToolUse", 2), hook("PostToolUse", 3))
    assert r.state == "busy"
    assert r.since == T0
    assert r.reported_at == T0 + timedelta(seconds=2)


def test_typing_makes_a_known_agent_busy_until_its_hooks_speak() -> None:
    r = run(hook("Stop", 1))
    after = typed(r, T0)
    assert after.state == "busy"
    assert after.event == "typed"
    # A Stop that began before the typing is older than it: it does not make the agent ready.
    assert apply(after, hook("Stop", 2), T0) is None
    assert typed(Readiness(), T0).state == "unknown"


def test_when_a_message_may_be_tried() -> None:
    busy = run(hook("UserPromptSubmit", 1))
    assert not may_type(busy, T0, "when-ready")
    assert may_type(busy, T0, "now")
    # Esc sends no hook: once the state is stale, the pane decides.
    assert may_type(busy, T0 + STALE_AFTER, "when-ready")
    assert may_type(Readiness(), T0, "when-ready")
    assert may_type(run(hook("Stop", 1)), T0, "when-ready")


def test_the_payload_is_reduced_and_bounded() -> None:
    report = hook(
        "PermissionRequest",
        1,
        tool_name="Write",
        tool_input={"file_path": "/tmp/x", "content": "y" * 100_000},
        transcript_path="/secret",
    )
    assert report.summary == "/tmp/x"
    long = hook("PreToolUse", 1, tool_name="Bash", tool_input={"command": "a\x1b" * 500})
    assert long.summary is not None
    assert len(long.summary) <= 160
    assert "\x1b" not in long.summary


def test_a_typed_message_is_submitted_once_a_prompt_carries_its_text() -> None:
    r = typed(run(hook("Stop", 1)), T0, {"evt_a": "stop,\ndo not run anything", "evt_b": "later"})
    assert (submitted(r, "evt_a"), submitted(r, "evt_b"), submitted(r, "evt_c")) == (
        False,
        False,
        None,
    )
    # Claude Code's prompt holds what was typed, several messages as one, header and all.
    prompt = "[from: ops] stop,\ndo not run anything\n[from: ops] another"
    r = apply(r, hook("UserPromptSubmit", 2**62, prompt=prompt), T0) or r
    assert (submitted(r, "evt_a"), submitted(r, "evt_b")) == (True, False)
    # Without hooks nothing can be known.
    assert submitted(typed(Readiness(), T0, {"evt_a": "x"}), "evt_a") is None


def test_a_prompt_taken_before_its_typing_was_recorded_is_still_submitted() -> None:
    """Gemini CLI's BeforeAgent can reach the mailbox before the mailbox records that it typed
    (measured): the prompt no typed message awaited is kept, and the typing it carried is
    submitted at once; a prompt of other words claims nothing."""
    gemini = [
        report_from("gemini", "SessionStart", 1, "s1", {}),
        report_from("gemini", "BeforeAgent", 2, "s1", {"prompt": "[cli:local from a] count it"}),
    ]
    r = typed(run(*gemini), T0, {"evt_a": "[cli:local from a] count it", "evt_b": "other"})

    assert (submitted(r, "evt_a"), submitted(r, "evt_b")) == (True, False)
    assert r.unclaimed is None  # claimed once only
    assert submitted(typed(r, T0, {"evt_c": "[cli:local from a] count it"}), "evt_c") is False
    # Or it arrives after the typing was recorded, its hook's clock earlier than the record's.
    r = typed(run(gemini[0]), T0, {"evt_d": "[cli:local from a] count it"})
    later = apply(r, gemini[1], T0)
    assert later is not None and submitted(later, "evt_d") is True
    assert (later.state, later.at_ns) == (r.state, r.at_ns)  # the state stays as it was


def test_codexs_reports_beside_its_turn_say_nothing_of_it() -> None:
    """Codex starts its session at the first prompt and runs both hooks in the background: the
    SessionStart that trails the prompt is passed over; any other SessionStart is not. Its
    notify of another thread (the one writing the task's title) is passed over too."""
    prompt = report_from("codex", "UserPromptSubmit", 1, "s1", {"prompt": "count the files"})
    start = report_from("codex", "SessionStart", 2, "s1", {})
    busy = run(prompt)
    assert busy.state == "busy" and beside_its_turn(busy, start)
    # Stamped before the prompt, it is the agent at its prompt, then busy.
    earlier = report_from("codex", "SessionStart", 0, "s1", {})
    assert run(earlier, prompt).state == "busy"
    assert not beside_its_turn(Readiness(), start)
    # A new session (a restarted Codex), or Claude Code's own, is news.
    assert not beside_its_turn(busy, report_from("codex", "SessionStart", 3, "s2", {}))
    claude = run(hook("UserPromptSubmit", 1, prompt="x"))
    assert not beside_its_turn(claude, hook("SessionStart", 2))

    # The notify names its thread: the session's own turn ended; the title's did not end it,
    # nor one whose session no hook has named yet.
    def notify(at: int, thread: str) -> HookReport:
        payload = {"type": "agent-turn-complete", "thread-id": thread}
        return report_from("codex", "agent-turn-complete", at, None, payload)

    assert notify(3, "s1").session_id == "s1"
    assert not beside_its_turn(busy, notify(3, "s1"))
    assert beside_its_turn(busy, notify(3, "title"))
    assert beside_its_turn(Readiness(), notify(3, "s1"))
    assert not beside_its_turn(claude, hook("agent-turn-complete", 3))
