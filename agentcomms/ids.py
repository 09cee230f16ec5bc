"""Event ids: ``evt_<ULID>``.

Two sources: :func:`new_event_id` for events we create, and :func:`provider_event_id` for a
message a provider delivered. The second is a pure function of the provider's own message
identity, so a provider that re-sends a message (Telegram after a restart, Twilio retrying a
webhook) yields the same id and the store or the workflow sees a duplicate, not a second event.

Derived ids are not time-ordered; nothing may sort events by id (the store orders by ``seq``).
"""

from __future__ import annotations

import hashlib
import json
import re

from ulid import ULID

EVENT_ID_PREFIX = "evt_"
_ULID_LENGTH = 26
# Bumping the tag would give every provider message a new id, so it is part of the contract.
_PROVIDER_ID_TAG = "agentcomms/provider-event/v1"


def new_event_id() -> str:
    """A fresh, time-ordered event id: ``evt_`` and a ULID."""
    return f"{EVENT_ID_PREFIX}{ULID()}"


def provider_event_id(provider: str, chat_id: str | int, message_id: str | int) -> str:
    """The stable event id of the message ``message_id`` in ``chat_id`` on ``provider``.

    The same message always maps to the same id; any other provider, chat or message maps to
    another. Chat and message ids are compared as text, so ``42`` and ``"42"`` are the same chat.
    """
    # A JSON array is an unambiguous encoding: ("a:b", "c") and ("a", "b:c") stay apart.
    canonical = json.dumps(
        [_PROVIDER_ID_TAG, provider, str(chat_id), str(message_id)],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    digest = hashlib.sha256(canonical.encode("utf-8")).digest()
    return f"{EVENT_ID_PREFIX}{ULID.from_bytes(digest[:16])}"


# Agent ids appear in workflow ids (agent-<id>), channel ids (agent:<id>) and pane text.
AGENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


def check_agent_id(value: str) -> str:
    """``value`` when it is a valid agent id; a ValueError that says the rule otherwise."""
    if not re.fullmatch(AGENT_ID_PATTERN, value):
        raise ValueError(
            f"agent id {value!r} is not valid: use letters, digits, '.', '_' or '-' "
            "(at most 64, starting with a letter or digit)"
        )
    return value


def is_event_id(value: object) -> bool:
    """Whether ``value`` is a well-formed event id (``evt_`` and a canonical 26-character ULID)."""
    if not isinstance(value, str) or not value.startswith(EVENT_ID_PREFIX):
        return False
    body = value[len(EVENT_ID_PREFIX) :]
    if len(body) != _ULID_LENGTH:
        return False
    try:
        # Round-tripping rejects lowercase and Crockford aliases (I, L, O): one id, one spelling.
        return str(ULID.from_str(body)) == body
    except ValueError:
        return False
