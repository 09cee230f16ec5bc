"""An approval in the agent's chats: the request with its buttons in each Telegram chat mapped to
the agent, and, once decided, each message edited to say who answered, how and where (its
buttons gone).

Which messages were posted for which approval is kept in this gateway's memory: after a restart
a press on an old message is still answered by the approval itself (it knows who decided), only
the edit is lost.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from agentcomms.approval_models import ApprovalRequest, ApprovalView, Behavior
from agentcomms.config import Config
from agentcomms.transports import ButtonPress

if TYPE_CHECKING:
    from agentcomms.transports.telegram import TelegramSender

log = logging.getLogger(__name__)

# What a button sends back: "ap:K7QF:a" (allow), "s" (for the session), "d" (deny); a
# question's options "o1" … "o4" (answer with that option).
BUTTON_PREFIX = "ap"
BUTTON_BEHAVIOR: dict[str, Behavior] = {"a": "allow", "s": "allow_session", "d": "deny"}
OPTION_BUTTON = "o"
PROVIDERS = ("telegram",)
# A plan is posted up to this much (Telegram's limit is 4,096); the terminal lists it whole.
PLAN_SHOWN_CHARS = 3_000


def pressed(press: ButtonPress) -> tuple[str, Behavior] | None:
    """(approval id, behavior) a button press stands for; None for any other button."""
    prefix, _, rest = press.data.partition(":")
    approval_id, _, short = rest.partition(":")
    if prefix != BUTTON_PREFIX or short not in BUTTON_BEHAVIOR or len(approval_id) != 4:
        return None
    return approval_id, BUTTON_BEHAVIOR[short]


def chosen_option(press: ButtonPress) -> tuple[str, int] | None:
    """(approval id, option number) a question's option button stands for; None otherwise."""
    prefix, _, rest = press.data.partition(":")
    approval_id, _, short = rest.partition(":")
    number = short.removeprefix(OPTION_BUTTON)
    if prefix != BUTTON_PREFIX or not short.startswith(OPTION_BUTTON) or not number.isdigit():
        return None
    return (approval_id, int(number)) if len(approval_id) == 4 else None


def asked(request: ApprovalRequest) -> str:
    """What the agent asks, for a chat: the tool and its input, the question, or the plan."""
    if request.ask == "question":
        return f"{request.agent_id} asks: {request.question}"
    if request.ask == "plan":
        plan = request.question or request.input_text
        if len(plan) > PLAN_SHOWN_CHARS:
            plan = plan[:PLAN_SHOWN_CHARS] + "\n… (the whole plan: agentcomms approvals)"
        return f"{request.agent_id} asks to carry out its plan:\n{plan}"
    return f"{request.agent_id} asks to use {request.tool}:\n{request.input_text}"


def _buttons(request: ApprovalRequest) -> list[tuple[str, str]]:
    def data(short: str) -> str:
        return f"{BUTTON_PREFIX}:{request.id}:{short}"

    if request.ask == "question":
        return [(o, data(f"{OPTION_BUTTON}{n}")) for n, o in enumerate(request.options, 1)]
    if request.ask == "plan":
        return [("Approve", data("a")), ("Keep planning", data("d"))]
    buttons = [("Allow", data("a"))]
    if request.suggestions:
        buttons.append(("Allow for this session", data("s")))
    return [*buttons, ("Deny", data("d"))]


def said(view: ApprovalView) -> str:
    """How it was decided, for people: "allowed by Alice on telegram"."""
    d = view.decision
    if d is None:
        return "still open"
    if d.behavior == "terminal":
        return "answered in the terminal"
    if d.behavior == "timeout":
        on = view.request.on_timeout
        return "no answer in time: " + ("denied" if on == "deny" else "left to the terminal")
    if d.behavior == "answer":
        return f"answered {d.answer!r} by {d.by} on {d.via}"
    how = {"allow": "allowed", "allow_session": "allowed for the session", "deny": "denied"}
    if view.request.ask == "plan":
        how = {"allow": "approved", "deny": "sent back to planning"}
    return f"{how.get(d.behavior, d.behavior)} by {d.by} on {d.via}"


class ApprovalChats:
    def __init__(self, cfg: Config) -> None:
        self._cfg = cfg
        self._posted: dict[str, list[tuple[str, str, str]]] = {}  # id -> (provider, chat, msg)
        self._tasks: set[asyncio.Task[Any]] = set()

    def announce(self, request: ApprovalRequest) -> None:
        """Post the request to the agent's chats, beside the hook's wait (never holding it)."""
        self._spawn(self._announce(request))

    def settle(self, view: ApprovalView) -> None:
        """Edit the request's messages to say how it was decided; once."""
        posted = self._posted.pop(view.request.id, [])
        if posted:
            self._spawn(self._settle(view, posted))

    async def drain(self) -> None:
        """Wait for the posts and edits under way (a test, or the gateway closing)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _sender(self) -> TelegramSender:
        from agentcomms.transports.telegram import TelegramSender

        return TelegramSender(self._cfg)

    def _chats(self, agent_id: str) -> list[tuple[str, str]]:
        chats = []
        for channel_id, agent in self._cfg.chat.channels.items():
            provider, _, chat = channel_id.partition(":")
            if agent == agent_id and provider in PROVIDERS:
                chats.append((provider, chat))
        return chats

    async def _announce(self, request: ApprovalRequest) -> None:
        text = f"{asked(request)}\n\n(approval {request.id})"
        buttons = _buttons(request)
        for provider, chat in self._chats(request.agent_id):
            try:
                message_id = await self._sender().send_buttons(chat, text, buttons)
            except Exception as exc:
                log.warning("approval %s: not posted to %s:%s: %s", request.id, provider, chat, exc)
                continue
            self._posted.setdefault(request.id, []).append((provider, chat, message_id))

    async def _settle(self, view: ApprovalView, posted: list[tuple[str, str, str]]) -> None:
        r = view.request
        text = f"{asked(r)}\n\n{r.id}: {said(view)}"
        for provider, chat, message_id in posted:
            try:
                await self._sender().edit_text(chat, message_id, text)
            except Exception as exc:
                log.warning("approval %s: %s:%s not edited: %s", r.id, provider, chat, exc)
