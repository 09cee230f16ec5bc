"""What a page's live stream says of one change (a server-sent event), as the page shows it:
only what that page needs (one agent's timeline and turn, the inbox, the agents' rows)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentcomms.models import LOCAL_CHANNEL, Event
from gateway.console import pages
from gateway.console.feed import Change


@dataclass(frozen=True)
class Shown:
    """What a page shows, so its stream carries what it needs: one agent's timeline, or the
    inbox (neither: the agents page)."""

    agent_id: str | None = None
    inbox: bool = False


def told(change: Change, page: Shown, csrf: str) -> str:
    """The server-sent event for `change` on `page`; "" when the page shows nothing of it."""
    page_agent = page.agent_id
    mine = page_agent is None or change.agent_id == page_agent
    data: dict[str, Any]
    if change.agent is not None:
        data = pages.agent_fields(change.agent)
    elif change.event is not None:
        e = change.event
        data = {
            "agent": e.agent_id,
            "at": pages.clock(e.created_at),
            "id": f"event-{e.id}",
            "reply": pages.reply_text(e),
        }
        if page_agent == e.agent_id or (page.inbox and _to_the_human(e)):
            data["html"] = pages.item(e)
    elif change.status is not None:
        data = {"id": f"event-{change.event_id}", "status": change.status}
    elif change.approval is not None and mine:
        view = change.approval
        back = f"/agents/{page_agent}" if page_agent else "/"
        data = {
            "id": f"approval-{view.request.id}",
            "html": pages.approval(view, csrf, back),
        }
    elif change.turn is not None and page_agent == change.agent_id:
        data = change.turn  # the agent's own page only: texts the script puts in as text
    else:
        return ""
    return f"event: {change.kind}\ndata: {json.dumps(data)}\n\n"


def _to_the_human(event: Event) -> bool:
    return event.channel_id == LOCAL_CHANNEL and event.direction == "out"
