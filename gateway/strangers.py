"""What a stranger may cost before anyone has admitted them, once for every provider.

A sender who is not allowed is recorded for the operator's audit and answered once with a
pairing code; each answer may be a billed message (an SMS), and anyone can write to a bot, or
add it to a group. So both are bounded: a few recorded messages per sender and per hour, a
bounded number per hour from all strangers together, a bounded number of pairing answers per
hour, and each recorded text cut short. Past a bound a stranger's message is dropped without a
write or an answer (counted in the ``sender_not_allowed_over_limit`` metric). A group chat that
is mapped to no agent is not the operator's: strangers there are ignored, not recorded.

The counts live in the gateway's memory, in windows of an hour: a restarted gateway starts
them again, which costs at most one more window's worth.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# Recorded (rejected) messages of one stranger per hour: enough to see what they wanted.
STRANGER_ROWS_PER_SENDER = 5
# Recorded messages of all strangers together per hour.
STRANGER_ROWS_PER_HOUR = 200
# Pairing codes offered (each answered by a message the operator may pay for) per hour.
PAIRING_REPLIES_PER_HOUR = 20
# Characters of a stranger's message kept in its recorded row.
STRANGER_TEXT_MAX = 500
# Chats where many people write to the bot at once; a private chat is one person's.
GROUP_CHAT_TYPES = frozenset({"group", "supergroup", "channel", "guild"})
WINDOW_S = 3600.0


def cut(text: str, most: int = STRANGER_TEXT_MAX) -> str:
    """``text`` kept to ``most`` characters, visibly cut."""
    return text if len(text) <= most else text[: most - 1] + "…"


class StrangerLimits:
    """The hour's counts of strangers' recorded messages and pairing answers."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._window = clock()
        self._rows_of: dict[tuple[str, str], int] = {}  # at most STRANGER_ROWS_PER_HOUR keys
        self._rows = 0
        self._replies = 0

    def _roll(self) -> None:
        now = self._clock()
        if now - self._window >= WINDOW_S:
            self._window = now
            self._rows_of.clear()
            self._rows = self._replies = 0

    def take_row(self, provider: str, sender_id: str) -> bool:
        """Whether one more message of this stranger may be recorded this hour (and count it)."""
        self._roll()
        key = (provider, sender_id)
        if self._rows >= STRANGER_ROWS_PER_HOUR or self._rows_of.get(key, 0) >= (
            STRANGER_ROWS_PER_SENDER
        ):
            return False
        self._rows_of[key] = self._rows_of.get(key, 0) + 1
        self._rows += 1
        return True

    def take_reply(self) -> bool:
        """Whether one more pairing code may be offered this hour (and count it)."""
        self._roll()
        if self._replies >= PAIRING_REPLIES_PER_HOUR:
            return False
        self._replies += 1
        return True

    def give_back_reply(self) -> None:
        """A reply counted by :meth:`take_reply` was not sent (the sender holds a code already)."""
        self._replies = max(0, self._replies - 1)
