"""What an agent asks with a tool call, as every surface will show it: a permission's input (a
Bash command as its command line, any other input as its JSON), each question of
``AskUserQuestion`` with its option labels, or ``ExitPlanMode``'s plan.

Shown visibly and nothing else (:mod:`agentcomms.visible`): no character deleted, no value
masked; the terminal and the console show it so, and a chat hides what it must itself, saying so
(:mod:`gateway.approvals.words`). What is too long to keep is cut, visibly, and the
request is then not whole: only the agent's own dialog shows it all, so only there is it allowed.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from agentcomms.approval_models import Ask
from agentcomms.bridge.sanitize import CleanText, truncate
from agentcomms.visible import visible

# What a person reads of a tool's input; longer is cut, visibly, and answered only in the
# agent's own dialog, the one place that shows it whole.
INPUT_CHARS = 40_000
# A plan is read whole where it can be (a surface splits it to its own limit).
PLAN_CHARS = 40_000
QUESTION_CHARS = 2_000
# Claude Code's tools that ask the human rather than act.
QUESTION_TOOL = "AskUserQuestion"
PLAN_TOOL = "ExitPlanMode"


def asked_with(tool_name: str, tool_input: dict[str, Any]) -> list[Asked]:
    """What the agent asks with this tool, each part shown visibly (nothing deleted, nothing
    masked: the terminal and the console show it as it will run)."""
    if tool_name == QUESTION_TOOL and isinstance(tool_input.get("questions"), list):
        asks: list[Asked] = []
        for q in tool_input["questions"]:
            if not isinstance(q, dict):
                continue
            text = shown_visibly(str(q.get("question") or q.get("header") or "?"), QUESTION_CHARS)
            labels = [
                shown_visibly(str(o.get("label")), 200)
                for o in q.get("options") or []
                if isinstance(o, dict) and o.get("label")
            ]
            whole = not (text.truncated or any(label.truncated for label in labels))
            asks.append(
                Asked(
                    "question",
                    text.text,
                    [label.text for label in labels],
                    q.get("multiSelect") is True,
                    text.text,
                    whole,
                )
            )
        if asks:
            return asks
    if tool_name == PLAN_TOOL:
        given = tool_input.get("plan")
        plan = shown_visibly(given, PLAN_CHARS) if isinstance(given, str) else None
        if plan is None:
            return [Asked("plan", None, [], False, "(no plan text)", True)]
        return [Asked("plan", plan.text, [], False, plan.text, not plan.truncated)]
    command = _input_text(tool_input)
    return [Asked("permission", None, [], False, command.text, not command.truncated)]


def acp_asked(tool_name: str, tool_input: dict[str, Any], options: list[str]) -> Asked:
    """A process agent's permission request: the call shown whole, as a question whose answers
    are the agent's own options (allow once, allow always, reject…)."""
    command = _input_text(tool_input)
    labels = [shown_visibly(o, 200) for o in options]
    question = f"{tool_name}: {command.text}"
    whole = not (command.truncated or any(label.truncated for label in labels))
    return Asked("question", question, [label.text for label in labels], False, command.text, whole)


class Asked(NamedTuple):
    """One thing the agent asks, as shown: whether several options may be chosen, and whether
    all of it fit (what did not is marked as cut, and only the agent's own dialog shows it)."""

    ask: Ask
    question: str | None  # a question's text, or the plan's
    options: list[str]
    multi: bool
    input_text: str
    whole: bool


def _input_text(tool_input: dict[str, Any]) -> CleanText:
    """A Bash command as its command line, any other input as its JSON; shown visibly, and cut
    (visibly) only past what a person could read."""
    command = tool_input.get("command")
    if isinstance(command, str) and set(tool_input) <= {"command", "description", "timeout"}:
        text = command
    else:
        text = json.dumps(tool_input, ensure_ascii=False, sort_keys=True)
    return shown_visibly(text, INPUT_CHARS)


def shown_visibly(text: str, chars: int) -> CleanText:
    """`text` shown visibly (:func:`agentcomms.visible.visible`), cut visibly past `chars`."""
    return truncate(visible(text), chars)
