"""The mailbox calls its activities by reference, through declarations of their signatures
(workflows/mailbox/activities.py): each must have an implementation with the same name, input and
result, or the worker would run something else than the workflow was type-checked against."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.delivery import PaneActivities
from activities.projection import ProjectionActivities
from activities.receipts import ReceiptActivities
from workflows.mailbox import activities as declared


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


def test_every_declared_mailbox_activity_is_implemented_with_the_same_signature() -> None:
    implemented = {
        **_definitions(PaneActivities),
        **_definitions(ProjectionActivities),
        **_definitions(ReceiptActivities),
    }
    declarations = _definitions(declared)
    assert set(declarations) == {
        "deliver_to_pane",
        "interrupt_pane",
        "check_unregister",
        "record_projection",
        "load_waiting_events",
        "queue_receipt",
    }
    for name, declaration in declarations.items():
        assert name in implemented, f"{name} is declared for the mailbox but not implemented"
        assert _signature(declaration) == _signature(implemented[name]), name
