"""Each socket method is declared once, above its code: ``@declare(who)``.

The declaration gives the method its name (the function's), its params' model (the type of its
first parameter), its result's type (its return type) and who may call it:

- :class:`Anyone`: what the deployment looks like (no message in it);
- :class:`Human`: the human (the CLI, the console); ``decides`` marks what decides for the human
  (answering an approval, admitting a sender, the phone menu), which is refused also to any
  process that runs in a registered agent's pane, whatever the request says;
- :class:`ForItself`: an agent acting for itself, naming the parameter that must be itself;
- :class:`Hook`: an agent's hook, for the pane it runs in.

A ``check`` names what else the method's requests must pass when they act for an agent (a reply
goes only to the agent's own chats). The table that serves the socket
(:mod:`gateway.socket.table`), the confinement (:mod:`gateway.confine`) and the error replies
read the declaration, and a method without one cannot be served.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, get_type_hints

from gateway.params import Params

if TYPE_CHECKING:
    from gateway.confine import Confinement
    from gateway.socket.caller import Caller

_DECLARATION = "__socket_method__"
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
P = TypeVar("P", bound=Params)

# What a request acting for agent `agent` must pass besides its `who`; returns the params to run
# with (a check may narrow them), or raises RpcError NOT_YOURS.
Check = Callable[["Confinement", str, Any], Awaitable[Any]]


@dataclass(frozen=True)
class Anyone:
    """Anyone who reaches the socket: the deployment's shape, no message in it."""

    def __str__(self) -> str:
        return "anyone"


@dataclass(frozen=True)
class Human:
    """The human. With ``decides``, refused also to a process in a registered agent's pane:
    an agent may not answer for its human. ``pane_may`` says which of these requests such a
    process may still make (a hook closing an approval as answered in the pane's own dialog)."""

    decides: bool = False
    pane_may: Callable[[Any], bool] | None = None

    def __str__(self) -> str:
        return "the human (outside the agents' panes)" if self.decides else "the human"


@dataclass(frozen=True)
class ForItself:
    """An agent acting for itself: ``param`` must name it (None: the method's check says
    what is its own). The human may call it too."""

    param: str | None

    def __str__(self) -> str:
        said = f" ({self.param} must be itself)" if self.param else ""
        return f"an agent acting for itself{said}, or the human"


@dataclass(frozen=True)
class Hook:
    """An agent's hook, for the pane it runs in; never a request acting for an agent by token
    (a hook has none), so an agent's MCP server cannot call it."""

    def __str__(self) -> str:
        return "an agent's hook (for its own pane)"


Who = Anyone | Human | ForItself | Hook


@dataclass(frozen=True)
class Declaration:
    who: Who
    check: Check | None


@dataclass(frozen=True)
class Method:
    """A socket method as its declaration and its code say it."""

    name: str
    params: type[Params]
    result: object
    who: Who
    check: Check | None
    run: Callable[[Params, Caller], Awaitable[Any]]
    summary: str


def declare(who: Who, *, check: Check | None = None) -> Callable[[F], F]:
    """Declare the decorated coroutine a socket method, callable by ``who``."""

    def mark(func: F) -> F:
        setattr(func, _DECLARATION, Declaration(who, check))
        return func

    return mark


def declared(room: object) -> list[Method]:
    """The socket methods ``room`` declares, bound to it."""
    return _declared(type(room), room)


def declared_in(cls: type) -> list[Method]:
    """The socket methods class ``cls`` declares, to read (they run only bound to a room)."""
    return _declared(cls, None)


def _declared(cls: type, room: object | None) -> list[Method]:
    methods = []
    for attr, func in inspect.getmembers(cls, inspect.isfunction):
        declaration = getattr(func, _DECLARATION, None)
        if isinstance(declaration, Declaration):
            bound = getattr(room, attr) if room is not None else _unbound(cls, attr)
            methods.append(_method(attr, func, bound, declaration))
    return methods


def _unbound(cls: type, name: str) -> Callable[..., Awaitable[Any]]:
    async def refuse(*_: object) -> Any:
        raise TypeError(f"{cls.__name__}.{name} was read from its class: it runs bound to a room")

    return refuse


def _method(name: str, func: Any, bound: Any, declaration: Declaration) -> Method:
    hints = get_type_hints(func)
    parameters = list(inspect.signature(func).parameters)[1:]  # past self
    params = hints.get(parameters[0]) if parameters else None
    if not (isinstance(params, type) and issubclass(params, Params)) or len(parameters) > 2:
        raise TypeError(
            f"socket method {name}: declare it as `async def {name}(self, p: SomeParams"
            "[, caller: Caller]) -> Result`, its first parameter typed with a gateway.params model"
        )
    who = declaration.who
    if isinstance(who, ForItself) and who.param and who.param not in params.model_fields:
        raise TypeError(
            f"socket method {name}: ForItself({who.param!r}) names no field of {params.__name__}"
        )
    if "return" not in hints:
        raise TypeError(f"socket method {name}: give it a return type (its result's type)")
    takes_caller = len(parameters) == 2

    async def run(p: Params, caller: Caller) -> Any:
        return await (bound(p, caller) if takes_caller else bound(p))

    summary = (inspect.getdoc(func) or "").split("\n\n")[0].replace("\n", " ")
    return Method(name, params, hints["return"], declaration.who, declaration.check, run, summary)
