"""The console's HTML, rendered on the server from the templates beside this module (Jinja2,
every value escaped), and the small JSON a page's stream carries."""

from __future__ import annotations

import html
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from agentcomms.approval_models import ApprovalView
from agentcomms.models import Agent, Event
from gateway.approvals.words import binding, said
from gateway.socket.results import agent_json

# How much of an agent's last reply the agents page shows.
REPLY_CHARS = 80

_env = Environment(
    loader=PackageLoader("gateway.console", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


# An agent's row of the agents page. Formatted here rather than by a template: a page of a
# thousand agents took twice as long through Jinja, which wraps and escapes every value through
# its own calls; here each value is escaped once, by `html.escape`, and nothing else is inserted.
_ROW = (
    '<tr id="agent-{id}" data-agent="{id}">\n'
    '  <td><a href="/agents/{id}">{id}</a></td>\n'
    '  <td class="state state-{state}" data-field="state">{state_text}</td>\n'
    '  <td data-field="status">{status}</td>\n'
    '  <td data-field="host">{host}</td>\n'
    '  <td data-field="pending">{pending}</td>\n'
    '  <td data-field="last_event">{last_event}</td>\n'
    '  <td data-field="last_reply" class="reply">{last_reply}</td>\n'
    "</tr>\n"
)


def state_words(agent: dict[str, Any]) -> str:
    """An agent's state as the pages say it: ``waiting (a permission prompt)``."""
    state = agent["state"] or "unknown"
    return f"{state} ({agent['waiting_for']})" if agent["waiting_for"] else state


_env.globals["state_words"] = state_words
# What each form of an approval's card carries of the request it shows.
_env.globals["binding"] = binding


def agent_rows(
    agents: Iterable[dict[str, Any]],
    last_events: dict[str, str] | None = None,
    last_replies: dict[str, str | None] | None = None,
) -> Markup:
    """The agents page's rows, every value escaped."""
    e = html.escape
    last_events, last_replies = last_events or {}, last_replies or {}
    return Markup(
        "".join(
            _ROW.format(
                id=e(a["id"]),
                state=e(a["state"] or "unknown"),
                state_text=e(state_words(a)),
                status=e(str(a["status"])),
                host=e(a["host"] or ""),
                pending="" if a["pending"] is None else e(str(a["pending"])),
                last_event=e(last_events.get(a["id"]) or ""),
                last_reply=e(last_replies.get(a["id"]) or ""),
            )
            for a in agents
        )
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


def reply_text(event: Event) -> str | None:
    """An agent's message out, as a list shows it: its first words; None for anything else."""
    if event.direction != "out" or event.type != "agent_message":
        return None
    text = " ".join(str(event.payload.get("text") or "").split())
    return text if len(text) <= REPLY_CHARS else text[: REPLY_CHARS - 1] + "…"


def approval(view: ApprovalView, csrf: str, back: str, late: str = "") -> str:
    """An approval's card: its forms while open, how it was decided (and `late`) once not."""
    return str(_part("approval")(view, csrf, back, said(view) + late))


def item(event: Event) -> str:
    return str(_part("item")(event, clock(event.created_at)))


def agent_fields(agent: Agent) -> dict[str, Any]:
    """What a page shows of an agent that changed: each field's text, and its row for a list."""
    row = agent_json(agent)
    return {
        "agent": agent.id,
        "fields": {
            "state": state_words(row),
            "status": row["status"],
            "host": row["host"] or "",
            "pending": str(row["pending"]),
        },
        "state": row["state"],
        "row": str(agent_rows([row])).strip(),
    }
