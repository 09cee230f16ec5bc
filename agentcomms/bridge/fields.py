"""Pydantic field types for what the tmux bridge accepts, so the config file and the gateway
refuse a bad target, socket or interrupt key when it is given, not when a delivery fails."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator

from agentcomms.bridge.checks import check_interrupt_key, check_socket, check_target
from agentcomms.errors import InvalidTarget


def _passes(check: Callable[[str], None]) -> AfterValidator:
    def validate(value: str) -> str:
        try:
            check(value)
        except InvalidTarget as exc:
            raise ValueError(str(exc)) from None
        return value

    return AfterValidator(validate)


TmuxTarget = Annotated[str, _passes(check_target)]
TmuxSocket = Annotated[str, _passes(check_socket)]
InterruptKey = Annotated[str, _passes(check_interrupt_key)]
