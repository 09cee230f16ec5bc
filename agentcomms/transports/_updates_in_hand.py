"""Telegram's updates while they are being handled: many chats at once, each chat in order, and
the long poll's offset never past an update that is not kept yet.

A voice note takes seconds to fetch and hear; handled one update after another, it held up the
poll and every chat behind it. Here each update is handled in a task of its own, behind the
earlier updates of its chat only (a human's text after their voice note reaches the agent
after the note's words), while the poll goes on taking the other chats' messages.

Telegram forgets updates by offset: ``getUpdates(offset=N)`` confirms every update before N. So
the offset given is that of the oldest update not kept yet (posted to a mailbox, or refused and
recorded); Telegram keeps sending it, and those kept after it, with every poll, and they are
skipped here. Should an update fail (not kept: Temporal did not take it), nothing newer of its
chat is handled before it, every update in hand is let go, and the poll starts again from the
oldest not kept, so the same update comes again with the same event id.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Item:
    """One update: Telegram's id for it, the chat whose order it keeps, and its handling."""

    id: int
    chat: Hashable
    handle: Callable[[], Awaitable[None]]


class UpdatesInHand:
    def __init__(self, *, most: int) -> None:
        self._most = most  # past this many in hand, newer updates wait to be sent again
        self._tasks: dict[int, asyncio.Task[None]] = {}  # in hand, and failed ones until let go
        self._tails: dict[Hashable, asyncio.Task[None]] = {}  # each chat's newest in hand
        self._kept: set[int] = set()  # kept while an older update is still in hand
        self._next: int | None = None  # after the newest update taken
        self._changed = asyncio.Event()
        self._failure: BaseException | None = None

    @property
    def offset(self) -> int | None:
        """What getUpdates is given: every update before it is kept."""
        return min(self._tasks, default=self._next)

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    def take(self, items: Iterable[Item]) -> int:
        """Start handling the updates not taken yet; how many were new."""
        new = 0
        for item in items:
            if item.id in self._tasks or item.id in self._kept:
                continue  # sent again because an older one is still in hand
            if len(self._tasks) >= self._most:
                break
            earlier = self._tails.get(item.chat)
            task = asyncio.create_task(self._in_order(earlier, item), name=f"update {item.id}")
            task.add_done_callback(functools.partial(self._done, item))
            self._tasks[item.id] = self._tails[item.chat] = task
            self._next = max(self._next or 0, item.id + 1)
            new += 1
        return new

    @property
    def crowded(self) -> bool:
        """Half the room or more is in hand: a poll now would bring few new updates."""
        return len(self._tasks) >= max(1, self._most // 2)

    async def settle(self, seconds: float) -> None:
        """Wait until an update in hand is kept or fails (when crowded: until half the room is
        free, or one fails), or ``seconds`` pass; then raise the failure of one that was not
        kept, if any.

        Telegram sends again, with each poll, every update from the oldest not kept, up to a
        hundred: polling again each time one is kept drains a burst one update per poll, so a
        human behind a thousand strangers waited minutes. Waiting for room takes many at a time.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        until_room = self.crowded
        while self._failure is None and self._tasks and (self.crowded or not until_room):
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), deadline - loop.time())
            except TimeoutError:
                break
            if not until_room:
                break
        self.raise_failure()

    def raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    async def let_go(self) -> None:
        """Stop handling every update in hand; the next poll starts from the oldest not kept."""
        self._next = self.offset
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._tails.clear()
        self._failure = None

    @staticmethod
    async def _in_order(earlier: asyncio.Task[None] | None, item: Item) -> None:
        if earlier is not None:
            await earlier  # raises when it was not kept: this one waits to come again as well
        await item.handle()

    def _done(self, item: Item, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            pass
        elif (failure := task.exception()) is not None:
            # It stays in hand until let go: the offset stays before it, and a newer update of
            # its chat waits behind it (and fails with it) rather than overtaking it.
            self._failure = self._failure or failure
        else:
            if self._tails.get(item.chat) is task:
                del self._tails[item.chat]
            del self._tasks[item.id]
            self._kept.add(item.id)
            # Telegram no longer sends what is before the offset: no need to remember it.
            self._kept = {i for i in self._kept if self.offset is None or i >= self.offset}
        self._changed.set()
