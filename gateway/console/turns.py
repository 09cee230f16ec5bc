"""A process agent's turn as it streams, for its console page: the reply as it is written, each
tool call with its status, the plan, and how the turn ended.

The agent's host tells the gateway (``TurnStart``, ``TurnUpdate`` with the updates gathered a
moment, ``TurnEnd``: :class:`agentcomms.acp.asking.TurnsToGateway`); this observer keeps each
agent's latest turn in memory, so a page opened mid-turn shows what came so far, and passes each
change to the open pages. Every text is put into the page as text, never as markup.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.console.feed import Change, Feed

# What a page keeps of a turn's reply, and of its tool calls.
TEXT_CHARS = 20_000
TOOLS_KEPT = 100
EVENTS = ("TurnStart", "TurnUpdate", "TurnEnd")


@dataclass
class TurnSoFar:
    """One agent's latest turn, as its page shows it."""

    running: bool = True
    ended: str = ""  # how it ended: its stop reason, or the error
    text: str = ""
    tools: dict[str, dict[str, str]] = field(default_factory=dict)  # id -> title, status
    plan: list[str] = field(default_factory=list)

    def apply(self, updates: list[dict[str, Any]]) -> None:
        for update in updates:
            kind = update.get("kind")
            if kind == "text" and isinstance(update.get("text"), str):
                self.text = (self.text + update["text"])[-TEXT_CHARS:]
            elif kind == "tool" and isinstance(update.get("id"), str):
                tool = self.tools.setdefault(update["id"], {"title": "a tool", "status": ""})
                tool.update({k: str(update[k]) for k in ("title", "status") if k in update})
                if len(self.tools) > TOOLS_KEPT:
                    del self.tools[next(iter(self.tools))]
            elif kind == "plan" and isinstance(update.get("entries"), list):
                self.plan = [str(e) for e in update["entries"]]


def ended_words(payload: dict[str, Any]) -> str:
    error = payload.get("error")
    if isinstance(error, str) and error:
        return f"ended on an error: {error[:300]}"
    return f"ended: {payload.get('stop_reason') or 'end_turn'}"


class LiveTurns:
    """Each agent's latest turn, told to the open pages as it changes (an observer of the
    agents' hooks)."""

    def __init__(self, feed: Feed) -> None:
        self.feed = feed
        self.turns: dict[str, TurnSoFar] = {}

    async def agent_did(self, agent_id: str, event: str, payload: dict[str, Any]) -> None:
        if event not in EVENTS:
            return
        told: dict[str, Any] = {"agent": agent_id, "event": event}
        if event == "TurnStart":
            self.turns[agent_id] = TurnSoFar()
        turn = self.turns.setdefault(agent_id, TurnSoFar())
        if event == "TurnUpdate":
            updates = payload.get("updates")
            told["updates"] = (
                [u for u in updates if isinstance(u, dict)] if isinstance(updates, list) else []
            )
            turn.apply(told["updates"])
        elif event == "TurnEnd":
            turn.running = False
            turn.ended = told["ended"] = ended_words(payload)
        self.feed.publish(Change("turn", agent_id, turn=told))
