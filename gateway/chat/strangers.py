"""What a stranger may cost before anyone has admitted them, once for every provider.

A sender who is not allowed is recorded for the operator's audit and answered once with a
pairing code; each answer may be a billed message (an SMS), and anyone can write to a bot, or
add it to a group. So both are bounded: a few recorded messages per sender and per hour, a
bounded number per hour from all strangers together, a bounded number of pairing answers per
hour, and each recorded text cut short. Past a bound a stranger's message is dropped without a
write or an answer (counted in the ``sender_not_allowed_over_limit`` metric). A group chat that
is mapped to no agent is not the operator's: strangers there are ignored, not recorded.

The counts live in the projection, by clock hour (``stranger_counts``): a gateway restarted, as
often as a stranger can make it restart, starts none of them again.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from agentcomms.store.guards import Guards

# Recorded (rejected) messages of one stranger per hour: enough to see what they wanted.
STRANGER_ROWS_PER_SENDER = 5
# Recorded messages of all strangers together per hour.
STRANGER_ROWS_PER_HOUR = 200
# Pairing codes offered (each answered by a message the operator may pay for) per hour.
PAIRING_REPLIES_PER_HOUR = 20
# Characters of a stranger's message kept in its recorded row.
STRANGER_TEXT_MAX = 500
# Chats where many people write to the bot at once; a private chat is one person's. (Slack's
# private channel is a "group", and its group direct message an "mpim".)
GROUP_CHAT_TYPES = frozenset({"group", "supergroup", "channel", "guild", "mpim"})
WINDOW_S = 3600.0


def cut(text: str, most: int = STRANGER_TEXT_MAX) -> str:
    """``text`` kept to ``most`` characters, visibly cut."""
    return text if len(text) <= most else text[: most - 1] + "…"


class StrangerLimits:
    """The hour's counts of strangers' recorded messages and pairing answers, in the store."""

    def __init__(self, store: Guards, *, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock
        # The hours whose total of rows, or of answers, is spent: the rest of such an hour
        # costs the store nothing (a thousand strangers, one write each, would).
        self._rows_spent: int | None = None
        self._replies_spent: int | None = None

    def _hour(self) -> int:
        return int(self._clock() // WINDOW_S)

    async def take_row(self, provider: str, sender_id: str) -> bool:
        """Whether one more message of this stranger may be recorded this hour (and count it)."""
        hour = self._hour()
        if self._rows_spent == hour:
            return False
        sender = _key("row", provider, sender_id)
        full = await self._store.take_stranger_cost(
            hour, {"rows": STRANGER_ROWS_PER_HOUR, sender: STRANGER_ROWS_PER_SENDER}
        )
        if full == "rows":
            self._rows_spent = hour
        return full is None

    async def take_reply(self) -> bool:
        """Whether one more pairing code may be offered this hour (and count it)."""
        hour = self._hour()
        if self._replies_spent == hour:
            return False
        if await self._store.take_stranger_cost(hour, {"replies": PAIRING_REPLIES_PER_HOUR}):
            self._replies_spent = hour
            return False
        return True

    async def give_back_reply(self) -> None:
        """A reply counted by :meth:`take_reply` was not sent (the sender holds a code already)."""
        await self._store.give_back_stranger_cost(self._hour(), "replies")


def _key(kind: str, provider: str, sender_id: str) -> str:
    # Sender ids are the provider's (up to 255 characters): long ones by digest.
    key = f"{kind}:{provider}:{sender_id}"
    return key if len(key) <= 300 else f"{kind}:{hashlib.sha256(key.encode()).hexdigest()}"
