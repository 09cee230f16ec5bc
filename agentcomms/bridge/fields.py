"""Pydantic field types for what the tmux bridge accepts, so the config file and the gateway
refuse a bad target, socket or interrupt key when it is given, not when a delivery fails."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator

from agentcomms.bridge.checks import check_interrupt_key, check_socket, check_target, socket_path
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


def _server(given: str) -> str:
    try:
        return socket_path(given)
    except InvalidTarget as exc:
        raise ValueError(str(exc)) from None


# A tmux server as a person names it, in the config as on the command line: a bare name as
# `tmux -L NAME`, anything with a '/' as `tmux -S PATH`; held as the socket's absolute path.
TmuxServer = Annotated[str, AfterValidator(_server)]
InterruptKey = Annotated[str, _passes(check_interrupt_key)]
