"""The methods the socket serves: those the rooms declare, and nothing else.

A request is served in one order: the method's declaration is found (else `method not found`),
its params are validated against the declared model (else `invalid params`, naming the field),
the confinement admits the caller as the declaration says (else `not yours`), and the method
runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar, cast

from pydantic import ValidationError
from temporalio.service import RPCError

from agentcomms.errors import RpcError
from gateway.socket.caller import Caller
from gateway.socket.confine import Confinement
from gateway.socket.declare import Hook, Human, Method, declared
from gateway.socket.protocol import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    NOT_YOURS,
    describe_validation,
)

R = TypeVar("R")


def temporal_trouble(address: str, exc: RPCError) -> str:
    return (
        f"Temporal at {address} did not answer ({exc.status.name}: {exc.message}); "
        "`agentcomms status` shows what is running"
    )


class MethodTable:
    """Every method the rooms declare, served to callers the declarations admit."""

    def __init__(self, confinement: Confinement, temporal_address: str, *rooms: object) -> None:
        self._confinement = confinement
        self._temporal = temporal_address
        self._methods: dict[str, Method] = {}
        for room in rooms:
            for method in declared(room):
                if method.name in self._methods:
                    raise TypeError(f"socket method {method.name} is declared twice")
                self._methods[method.name] = method

    def __iter__(self) -> Any:
        return iter(sorted(self._methods.values(), key=lambda m: m.name))

    def get(self, name: str) -> Method:
        method = self._methods.get(name)
        if method is None:
            known = ", ".join(sorted(self._methods))
            raise RpcError(METHOD_NOT_FOUND, f"unknown method {name!r}; known: {known}")
        return method

    async def call_declared(
        self, method: Callable[..., Awaitable[R]], params: dict[str, Any], caller: Caller
    ) -> R:
        """`method` (a room's declared function, read from its class) asked as the socket asks
        it, its result typed as it declares: for a caller inside the gateway (the console)."""
        return cast(R, await self.call(method.__name__, params, caller))

    async def call_hook(self, name: str, params: dict[str, Any], caller: Caller) -> Any:
        """A request on the hooks' own door: only what a hook may ask (its reports, its
        approvals, and closing one as answered in the agent's own dialog)."""
        method = self.get(name)
        who = method.who
        if not (isinstance(who, Hook) or (isinstance(who, Human) and who.pane_may is not None)):
            hooks = ", ".join(m.name for m in self if isinstance(m.who, Hook))
            raise RpcError(
                NOT_YOURS,
                f"{name} is not served on the hooks' door (server.hooks_socket_path), which "
                f"serves an agent's hooks only ({hooks}); the human uses server.socket_path.",
            )
        return await self.call(name, params, replace(caller, hooks_door=True))

    async def call(self, name: str, params: dict[str, Any], caller: Caller) -> Any:
        method = self.get(name)
        try:
            parsed = method.params.model_validate(params)
        except ValidationError as exc:
            raise RpcError(INVALID_PARAMS, describe_validation(exc)) from None
        parsed = await self._confinement.admit(method, parsed, caller)
        try:
            return await method.run(parsed, caller)
        except RPCError as exc:  # Temporal itself (a method that can say more has said it)
            raise RpcError(INTERNAL_ERROR, temporal_trouble(self._temporal, exc)) from None
