"""What changes while a console page is open: agents' rows, new events, approvals.

One watcher serves every open page, and only while a page listens. On PostgreSQL it reads
nothing until the tables announce a change as it commits (notices, see
:mod:`agentcomms.store.changes`), then reads exactly the rows announced: nothing is polled, and
an event that commits after one with a higher seq is not missed. On SQLite, which has no
notices between processes (the workers write the file from theirs), it reads the projection a
few times a second: agents written since it last looked, events after the last it saw (SQLite
commits one write at a time, in seq order), and the recent events' statuses; one shared read
for every page, never one per agent. An approval opened or decided is told by the gateway
itself. Each page's stream gets every change and picks what it shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from agentcomms.approval_models import ApprovalView
from agentcomms.models import Agent, Event
from agentcomms.store import Store
from agentcomms.store.changes import Notices
from gateway.agents.hosts import counted_from_events

log = logging.getLogger(__name__)

# How often the projection is read while a page listens: a state change shows within this and
# the writer's own delay.
TICK_S = 0.25
# Rows are written at their writer's time, a moment before they land: read back this far.
SETTLE = timedelta(seconds=5)
EVENTS_PER_TICK = 200
# The newest events whose status a page may show moving on (queued → delivered, failed).
WATCHED_STATUSES = 500
# A page that stops reading (a sleeping laptop) is dropped past this; its browser connects again.
BACKLOG = 2_000
# How often a watcher waiting for notices looks whether any page still listens.
IDLE_CHECK_S = 1.0
# On PostgreSQL an event may commit after events with higher seqs (another agent's, written at
# the same moment): a page's stream starts this many seqs before the page's own read, so one
# that landed between the page's read and its stream is told too (a page ignores repeats).
LATE_SEQS = 100


@dataclass(frozen=True)
class Change:
    kind: Literal["agent", "event", "status", "approval", "turn"]
    agent_id: str
    agent: Agent | None = None
    event: Event | None = None
    seq: int = 0
    approval: ApprovalView | None = None
    event_id: str | None = None
    status: str | None = None
    turn: dict[str, Any] | None = None  # a process agent's turn as it streams (console.turns)


def _shown(a: Agent) -> tuple[Any, ...]:
    return (a.state, a.waiting_for, a.state_since, a.status, a.pending, a.host, a.target)


async def with_waiting(store: Store, agents: list[Agent]) -> list[Agent]:
    """The agents' rows, each saying how many messages wait for it now, as `agents` says it:
    while a backlog is typed the row keeps the count from before (it is rewritten only once the
    backlog drained), and the projection's events say what is left."""
    counted = {a.id for a in agents if counted_from_events(a)}
    waiting = await store.waiting_counts(sorted(counted)) if counted else {}
    return [
        a.model_copy(update={"pending": waiting.get(a.id, 0)}) if a.id in counted else a
        for a in agents
    ]


class Feed:
    def __init__(self, store: Store, *, tick_s: float = TICK_S) -> None:
        self._store = store
        self._tick_s = tick_s
        self._pages: set[asyncio.Queue[Change | None]] = set()
        self._watcher: asyncio.Task[None] | None = None
        self._closed = False

    def publish(self, change: Change) -> None:
        for page in list(self._pages):
            try:
                page.put_nowait(change)
            except asyncio.QueueFull:
                self._drop(page)

    def approval(self, view: ApprovalView) -> None:
        """An approval opened or decided (an observer of the gateway's approvals)."""
        self.publish(Change("approval", view.request.agent_id, approval=view))

    @contextlib.asynccontextmanager
    async def listen(self) -> AsyncIterator[asyncio.Queue[Change | None]]:
        """A page's queue of changes; None in it means the page must connect again."""
        page: asyncio.Queue[Change | None] = asyncio.Queue(BACKLOG)
        if self._closed:
            page.put_nowait(None)
        self._pages.add(page)
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.create_task(self._watch(), name="console feed")
        try:
            yield page
        finally:
            self._pages.discard(page)

    def start_over(self) -> None:
        """Tell every open page to read itself again whole (it reloads, and listens anew)."""
        for page in list(self._pages):
            self._drop(page)

    async def close(self) -> None:
        self._closed = True
        self.start_over()
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher

    def _drop(self, page: asyncio.Queue[Change | None]) -> None:
        self._pages.discard(page)
        while not page.empty():
            page.get_nowait()
        page.put_nowait(None)

    async def _watch(self) -> None:
        lost = False
        while self._pages:
            try:
                async with self._store.notices() as heard:
                    if heard is None:
                        await self._poll()
                        continue
                    if lost:
                        # What was announced while nobody listened is gone: every page reads
                        # itself again, now that the database answers.
                        self.start_over()
                    await self._follow(heard)
            except Exception as exc:  # the database away for a moment: look again
                log.warning("console: cannot read the projection: %s", exc)
                lost = True
                await asyncio.sleep(1)

    async def _follow(self, heard: asyncio.Queue[str | None]) -> None:
        """Publish what the tables announce, as they announce it (PostgreSQL)."""
        known: dict[str, tuple[Any, ...]] = {}
        while self._pages:
            try:
                first = await asyncio.wait_for(heard.get(), IDLE_CHECK_S)
            except TimeoutError:
                continue
            told = [first]
            while not heard.empty():
                told.append(heard.get_nowait())
            if None in told:
                raise ConnectionError("the connection listening for notices was lost")
            notes = Notices()
            for payload in told:
                if payload is not None:
                    notes.add(payload)
            agents = await self._store.agents_by_id(notes.agents) if notes.agents else []
            events = await self._store.events_by_seq(notes.events) if notes.events else []
            moved = await self._store.statuses_by_seq(notes.statuses) if notes.statuses else []
            for seq, event in events:
                self.publish(Change("event", event.agent_id, event=event, seq=seq))
            for event_id, agent_id, status in moved:
                self.publish(Change("status", agent_id, event_id=event_id, status=status))
            queued_or_typed = {e.agent_id for _, e in events} | {a for _, a, _ in moved}
            await self._tell_agents(known, agents, queued_or_typed)

    async def _poll(self) -> None:
        """Read what changed a few times a second (SQLite)."""
        known: dict[str, tuple[Any, ...]] = {}
        # Agents with messages waiting, looked at every read: a backlog's first messages are
        # typed after they left the recent events whose statuses are read.
        draining: dict[str, Agent] = {}
        statuses: dict[str, str] = {}
        newest: datetime | None = None
        seq: int | None = None
        while self._pages:
            try:
                agents = await self._store.agents_changed_since(
                    (newest - SETTLE) if newest else datetime.min
                )
                first = seq is None
                if seq is None:
                    seq = await self._store.last_seq()
                events = await self._store.events_after_seq(seq, EVENTS_PER_TICK)
                recent = await self._store.statuses_after_seq(seq - WATCHED_STATUSES)
            except Exception as exc:  # the database away for a moment: look again
                log.warning("console: cannot read the projection: %s", exc)
                await asyncio.sleep(1)
                continue
            for agent in agents:
                newest = max(newest or agent.updated_at, agent.updated_at)
            queued_or_typed = {e.agent_id for _, e in events}
            for seq, event in events:
                self.publish(Change("event", event.agent_id, event=event, seq=seq))
                # Shown as read: typed before the statuses were read, it is told moving on.
                statuses[event.id] = event.status
            for event_id, agent_id, status in recent:
                if statuses.get(event_id, status) != status:
                    queued_or_typed.add(agent_id)
                    self.publish(Change("status", agent_id, event_id=event_id, status=status))
            statuses = {event_id: status for event_id, _, status in recent}
            try:
                await self._tell_agents(
                    known, agents, queued_or_typed, quiet=first, draining=draining
                )
            except Exception as exc:  # the database away for a moment: look again
                log.warning("console: cannot read the projection: %s", exc)
            await asyncio.sleep(self._tick_s)

    async def _tell_agents(
        self,
        known: dict[str, tuple[Any, ...]],
        written: list[Agent],
        queued_or_typed: set[str],
        *,
        quiet: bool = False,
        draining: dict[str, Agent] | None = None,
    ) -> None:
        """Publish the agents whose row, as a page shows it, changed: rows written, and the
        agents whose messages were queued or typed, whose count of what waits moved while their
        row did not. `quiet`: only remember the agents not seen before (the first read).
        `draining`: agents to look at again (kept up to date here), as the row last read."""
        rows = {**(draining or {}), **{a.id: a for a in written}}
        if others := queued_or_typed - rows.keys():
            rows |= {a.id: a for a in await self._store.agents_by_id(others)}
        for agent in await with_waiting(self._store, list(rows.values())):
            if draining is not None:
                if agent.pending and counted_from_events(agent):
                    draining[agent.id] = agent
                else:
                    draining.pop(agent.id, None)
            shown = _shown(agent)
            if known.get(agent.id) != shown:
                was_known = agent.id in known
                known[agent.id] = shown
                if was_known or not quiet:
                    self.publish(Change("agent", agent.id, agent=agent))
