"""Hosts whose worker is down: their agents are unreachable, since when, with what waits.

A host's mailboxes run on its own task queue, so while its worker is down they cannot run at all,
not even to say so: the gateway finds out from Temporal instead, in two ways.

- Silence: Temporal reports when each worker last polled the host's queue. A live worker renews
  its long poll as often as the server ends it (a minute by default); none seen for a quarter
  longer (:func:`agentcomms.temporal.poll_silence_s`) is gone.
- A task nobody takes: a message for a mailbox on that host makes a workflow task; a live worker
  starts it within moments, so one left unstarted for `UNTAKEN_TASK_S`, on a queue nobody has
  polled for as long, means nobody polls, well before the silence shows. (A busy worker polls
  again after every task, so its backlog is never mistaken for a host that is down.)

"Since" is the host's last poll as Temporal reports it; once Temporal has forgotten the worker
(after about five minutes), the time this gateway first saw the host silent, which it keeps until
a worker polls again.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import PendingWorkflowTaskState
from temporalio.client import Client
from temporalio.service import RPCError

from agentcomms.models import Agent, utcnow
from agentcomms.store import Store
from agentcomms.temporal import last_polls
from agentcomms.workflow_ids import host_task_queue
from workflows.mailbox.client import mailbox_handle

# Longer than a sticky queue's 5 s hand-back to the host's queue, plus a busy worker's delay.
UNTAKEN_TASK_S = 20.0
# Mailboxes asked per host for an untaken task: those with the most waiting.
PROBED_PER_HOST = 3


@dataclass(frozen=True)
class HostDown:
    host: str
    since: datetime
    last_poll: datetime | None  # None: Temporal reports no poll (never, or forgotten)

    def reason(self) -> str:
        seen = (
            f"last poll {self.last_poll.isoformat(timespec='seconds')}"
            if self.last_poll
            else "no poll reported"
        )
        return (
            f"host {self.host} has no worker ({seen}): its messages wait; start "
            f"`agentcomms worker --host-id {self.host}` there"
        )


@dataclass(frozen=True)
class HostView:
    """A host as the console shows it."""

    host: str
    polls: dict[str, float] | None  # each worker's seconds since its last poll; None: unknown
    down: HostDown | None
    agents: list[Agent]
    waiting: int
    silence_s: float  # a worker not seen for longer has most likely stopped

    @property
    def polling(self) -> bool:
        """Whether a worker polled the host's queue lately (and the host is not judged down)."""
        return self.down is None and any(a <= self.silence_s for a in (self.polls or {}).values())


class HostWatch:
    """Tells which hosts are down; remembers since when, for as long as this gateway runs."""

    def __init__(self, client: Client, store: Store, silence_s: float) -> None:
        self._client = client
        self._store = store
        self.silence_s = silence_s  # poll_silence_s of the deployment's Temporal
        self._silent_since: dict[str, datetime] = {}

    async def down(self, agents: Iterable[Agent]) -> tuple[dict[str, HostDown], dict[str, int]]:
        """The hosts of these agents that are down, and how many messages wait for each agent
        not offline (from the projection's events, which the gateway writes and each typing
        settles: an agent's own row is rewritten only when its backlog has drained)."""
        by_host: dict[str, list[Agent]] = defaultdict(list)
        for agent in agents:
            if agent.host and counted_from_events(agent):
                by_host[agent.host].append(agent)
        if not by_host:
            return {}, {}
        waiting = await self._store.waiting_counts([a.id for a in _flat(by_host.values())])
        found = await asyncio.gather(
            *(self._check(host, hosted, waiting) for host, hosted in by_host.items())
        )
        down = {d.host: d for d in found if d is not None}
        counts = {a.id: waiting.get(a.id, 0) for a in _flat(by_host.values())}
        return down, counts

    async def survey(self, agents: Iterable[Agent]) -> list[HostView]:
        """Every host agents are registered on, by name: its workers' polls, whether it is
        down, its agents and what waits for them."""
        by_host: dict[str, list[Agent]] = defaultdict(list)
        for agent in agents:
            if agent.host:
                by_host[agent.host].append(agent)
        waiting = await self._store.waiting_counts([a.id for a in _flat(by_host.values())])

        async def one(host: str, hosted: list[Agent]) -> HostView:
            polls = await self.polls(host_task_queue(host))
            live = [a for a in hosted if a.status != "offline"]
            down = None
            if polls is not None and live:
                down = await self._judge(host, live, waiting, polls)
            return HostView(
                host=host,
                polls=polls,
                down=down,
                agents=sorted(hosted, key=lambda a: a.id),
                waiting=sum(waiting.get(a.id, 0) for a in hosted),
                silence_s=self.silence_s,
            )

        return list(await asyncio.gather(*(one(h, by_host[h]) for h in sorted(by_host))))

    async def polls(self, task_queue: str) -> dict[str, float] | None:
        """Each worker polling `task_queue`, with the seconds since its last poll; None when
        Temporal cannot say."""
        try:
            return await last_polls(self._client, task_queue)
        except RPCError:
            return None

    async def _check(
        self, host: str, hosted: list[Agent], waiting: dict[str, int]
    ) -> HostDown | None:
        try:
            polls = await last_polls(self._client, host_task_queue(host))
        except RPCError:
            return None  # Temporal cannot say: claim nothing
        return await self._judge(host, hosted, waiting, polls)

    async def _judge(
        self, host: str, hosted: list[Agent], waiting: dict[str, int], polls: dict[str, float]
    ) -> HostDown | None:
        now = utcnow()
        last_poll = now - timedelta(seconds=min(polls.values())) if polls else None
        silent = not any(age <= self.silence_s for age in polls.values())
        # A worker that polled moments ago is alive, only busy: its tasks wait their turn.
        quiet = not polls or min(polls.values()) >= UNTAKEN_TASK_S
        if not silent and not (quiet and await self._untaken_task(hosted, waiting, now)):
            self._silent_since.pop(host, None)
            return None
        since = self._silent_since.setdefault(host, last_poll or now)
        if last_poll is not None and last_poll < since:
            since = self._silent_since[host] = last_poll
        return HostDown(host=host, since=since, last_poll=last_poll)

    async def _untaken_task(
        self, hosted: list[Agent], waiting: dict[str, int], now: datetime
    ) -> bool:
        """Whether a mailbox with messages waiting has a workflow task no worker has taken."""
        busiest = sorted((a for a in hosted if waiting.get(a.id)), key=lambda a: -waiting[a.id])
        for agent in busiest[:PROBED_PER_HOST]:
            try:
                described = await mailbox_handle(self._client, agent.id).describe()
            except RPCError:
                continue
            raw = described.raw_description
            if not raw.HasField("pending_workflow_task"):
                continue
            task = raw.pending_workflow_task
            if task.state != PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED:
                continue
            scheduled = task.scheduled_time.ToDatetime(tzinfo=now.tzinfo)
            if (now - scheduled).total_seconds() >= UNTAKEN_TASK_S:
                return True
        return False


def counted_from_events(agent: Agent) -> bool:
    """Whether what waits for the agent is counted from the projection's events rather than
    read from its row: for an agent with a pane on a host, whose mailbox rewrites its row only
    once a backlog has drained (`agents`, and the console's live rows, say the same)."""
    return bool(agent.host) and agent.status != "offline"


def _flat(groups: Iterable[list[Agent]]) -> list[Agent]:
    return [a for group in groups for a in group]


def hosts_down(agents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per host whose worker is down: since when, its agents, and how many messages wait."""
    hosts: dict[str, dict[str, Any]] = {}
    for a in agents:
        if a["status"] == "unreachable" and a.get("unreachable_since") and a["host"]:
            host = hosts.setdefault(
                a["host"],
                {"host": a["host"], "since": a["unreachable_since"], "agents": [], "pending": 0},
            )
            host["agents"].append(a["id"])
            host["pending"] += a["pending"] or 0
    return list(hosts.values())
