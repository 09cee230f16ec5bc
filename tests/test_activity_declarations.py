"""Workflows call their activities by reference, through declarations of their signatures
(``workflows/<workflow>/activities.py``, and ``workflows/activities.py`` for those more than one
workflow runs): each must have an implementation with the same name, input and result, or the
worker would run something else than the workflow was type-checked against."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from temporalio import activity

import workflows.activities
from activities.approvals import ApprovalActivities
from activities.chat import ChatActivities
from activities.delivery import PaneActivities
from activities.escalation import EscalationActivities
from activities.projection import ProjectionActivities
from activities.receipts import ReceiptActivities
from activities.voice import TwilioCallActivities, VoiceActivities
from workflows.approval import activities as approval
from workflows.call import activities as call
from workflows.escalation import activities as escalation
from workflows.mailbox import activities as mailbox
from workflows.outbox import activities as outbox

IMPLEMENTATIONS = (
    PaneActivities,
    ProjectionActivities,
    ReceiptActivities,
    ChatActivities,
    VoiceActivities,
    TwilioCallActivities,
    EscalationActivities,
    ApprovalActivities,
)

# Each workflow's declarations: everything it runs, shared declarations included.
DECLARED: dict[str, tuple[ModuleType, set[str]]] = {
    "mailbox": (
        mailbox,
        {
            "deliver_to_pane",
            "interrupt_pane",
            "check_registration",
            "check_unregister",
            "follow_up_prompt",
            "record_projection",
            "load_waiting_events",
            "queue_receipt",
            "recall_mailbox",
            "check_report",
        },
    ),
    "outbox": (outbox, {"send_chat", "record_projection"}),
    "call": (
        call,
        {
            "check_call",
            "check_line_event",
            "check_turn",
            "synthesize_speech",
            "transcribe_speech",
            "record_call",
            "send_call_fallback",
            "post_call_answer",
            "place_twilio_call",
            "update_twilio_call",
            "end_twilio_call",
        },
    ),
    "escalation": (escalation, {"fire_rung", "check_escalation_answered"}),
    "approval": (approval, {"check_decision"}),
}


def _definitions(owner: object) -> dict[str, Callable[..., Any]]:
    found = {}
    for _, fn in inspect.getmembers(owner, callable):
        defn = activity._Definition.from_callable(fn)
        if defn is not None and defn.name:
            found[defn.name] = fn
    return found


def _signature(fn: Callable[..., Any]) -> tuple[list[Any], Any]:
    hints = typing.get_type_hints(fn)
    returned = hints.pop("return")
    return list(hints.values()), returned


@pytest.mark.parametrize("name", DECLARED)
def test_every_declared_activity_is_implemented_with_the_same_signature(name: str) -> None:
    module, expected = DECLARED[name]
    implemented: dict[str, Callable[..., Any]] = {}
    for owner in IMPLEMENTATIONS:
        implemented.update(_definitions(owner))
    declarations = _definitions(module)
    assert set(declarations) == expected
    for activity_name, declaration in declarations.items():
        assert activity_name in implemented, f"{activity_name} is declared but not implemented"
        assert _signature(declaration) == _signature(implemented[activity_name]), activity_name


def test_each_activity_is_declared_once() -> None:
    """A workflow package names a shared declaration (re-exports it); it never writes its own."""
    modules = [workflows.activities, *(module for module, _ in DECLARED.values())]
    declared: dict[str, set[int]] = {}
    for module in modules:
        for activity_name, fn in _definitions(module).items():
            declared.setdefault(activity_name, set()).add(id(fn))
    twice = sorted(name for name, fns in declared.items() if len(fns) > 1)
    assert not twice, f"declared more than once: {twice}"
