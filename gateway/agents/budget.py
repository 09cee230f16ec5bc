"""An agent's hourly budget (``budget``, ``agents.ID.budget``): each call it places, each SMS or
WhatsApp message it sends and each escalation ladder that texts or calls for it is counted in
the projection for the hour (beside what strangers cost, so a gateway restart resets nothing),
and one past the budget is refused, saying which budget, where it is set and when the next
hour begins. An agent can be prompt-injected or loop, and each of these rings the human's phone
or is billed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from agentcomms.config import Config
from agentcomms.config.budget import Spending, budget_for
from agentcomms.errors import RpcError
from agentcomms.models import utcnow
from agentcomms.store import Store
from gateway.socket.protocol import BUDGET_SPENT

log = logging.getLogger(__name__)

WHAT: dict[Spending, str] = {
    "calls": "calls",
    "texts": "SMS and WhatsApp messages",
    "ladders": "escalation ladders that text or call",
}


class Budgets:
    def __init__(
        self, cfg: Config, store: Store, *, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self._cfg = cfg
        self._store = store
        self._clock = clock

    async def spend(self, agent_id: str, what: Spending) -> None:
        """Count one more of `what` for `agent_id` this hour; RpcError(BUDGET_SPENT) saying why
        when its budget is spent (then nothing is counted)."""
        refusal = await self.refusal(agent_id, what)
        if refusal is not None:
            raise RpcError(BUDGET_SPENT, refusal)

    async def ladder_refusal(self, agent_id: str) -> str | None:
        """Count a ladder for `agent_id` when its ladder texts or calls (one that only posts to
        chats costs nothing): None, or why it may not climb."""
        rungs, _, _ = self._cfg.escalation_for(agent_id)
        if all(rung.via == "chat" for rung in rungs):
            return None
        return await self.refusal(agent_id, "ladders")

    async def refusal(self, agent_id: str, what: Spending) -> str | None:
        """Count one more of `what` for `agent_id` this hour: None, or why not (its budget for
        the hour is spent, and nothing is counted)."""
        budget, key = budget_for(self._cfg, agent_id)
        most = getattr(budget, what)
        now = self._clock()
        hour = int(now.timestamp() // 3600)
        if await self._store.take_stranger_cost(hour, {f"budget:{what}:{agent_id}": most}) is None:
            return None
        nxt = datetime.fromtimestamp((hour + 1) * 3600, UTC)
        log.warning("%s: its budget of %s %s an hour is spent", agent_id, most, what)
        return (
            f"{agent_id} has spent its hourly budget of {most} {WHAT[what]} ({key}.{what}); "
            f"the next hour begins at {nxt:%H:%M} UTC, in {_minutes(nxt - now)}"
        )


def _minutes(left: timedelta) -> str:
    minutes = max(1, -(-int(left.total_seconds()) // 60))
    return f"{minutes} minute{'s' if minutes != 1 else ''}"
