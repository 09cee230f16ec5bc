"""The console's HTML, rendered on the server from the templates beside this module (Jinja2,
every value escaped), and the small JSON a page's stream carries."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from agentcomms.approval_models import ApprovalView
from agentcomms.models import Agent, Event
from gateway.approval_surfaces.words import said
from gateway.methods import agent_json

# How much of an agent's last reply the agents page shows.
REPLY_CHARS = 80

_env = Environment(
    loader=PackageLoader("gateway.console", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def clock(at: datetime | str | None) -> str:
    """A time as a person scans a list: 19:07:18 (UTC, as the CLI prints)."""
    if at is None:
        return ""
    if isinstance(at, str):
        at = datetime.fromisoformat(at)
    return at.strftime("%H:%M:%S")


def render(name: str, **context: Any) -> str:
    return _env.get_template(name).render(**context)


def _part(name: str) -> Any:
    return getattr(_env.get_template("parts.html").module, name)


def state_text(agent: dict[str, Any]) -> str:
    return str(_part("state_text")(agent))


def agent_row(agent: dict[str, Any], last_event: str | None, last_reply: str | None) -> str:
    return str(_part("agent_row")(agent, last_event, last_reply))


def reply_text(event: Event) -> str | None:
    """An agent's message out, as a list shows it: its first words; None for anything else."""
    if event.direction != "out" or event.type != "agent_message":
        return None
    text = " ".join(str(event.payload.get("text") or "").split())
    return text if len(text) <= REPLY_CHARS else text[: REPLY_CHARS - 1] + "…"


def approval(view: ApprovalView, csrf: str, back: str) -> str:
    return str(_part("approval")(view, csrf, back, said(view)))


def item(event: Event) -> str:
    return str(_part("item")(event, clock(event.created_at)))


def agent_fields(agent: Agent) -> dict[str, Any]:
    """What a page shows of an agent that changed: each field's text, and its row for a list."""
    row = agent_json(agent)
    return {
        "agent": agent.id,
        "fields": {
            "state": state_text(row),
            "status": row["status"],
            "host": row["host"] or "",
            "pending": str(row["pending"]),
        },
        "state": row["state"],
        "row": agent_row(row, None, None),
    }
