"""The projection rebuilt from Temporal (`agentcomms db rebuild`, and `up` on an empty or missing
database): Temporal's histories are the source of truth, the projection a copy that can be
made again from them, as far as Temporal still keeps them (the namespace's retention).

What comes back: each agent's row (its pane, status and state, from its mailbox), its messages
in (texts from the runs that received them, what became of each), its messages to chats (from
its outboxes, sent or failed or waiting), when its newest pane was signed, which run sent each
chat item (so a copy signalled again sends nothing), the phone calls, and the chats the config
maps. Open approvals are read from Temporal directly and need nothing here.

What does not come back lives only in the projection: the agents' messages to the human's
terminal (`cli:local`, whose inbox the projection is), messages refused before they reached a
mailbox (a stranger's, past a limit), paired chat senders (they pair again), which chat message
showed which approval, and an agent's read cursor (set after the messages already typed).

Writing never overwrites a delivered message, and inserts only what is missing: running it
against a database that holds rows changes none of them but those Temporal knows better.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from temporalio.client import Client, WorkflowExecution

from agentcomms.config import Config
from agentcomms.models import CallRecord, Channel, Event
from agentcomms.store import MESSAGE_TYPES, Store
from agentcomms.trust import DeploymentKey
from agentcomms.voice.audio import AudioStore
from agentcomms.workflow_ids import CALL_WORKFLOW, MAILBOX_WORKFLOW, OUTBOX_WORKFLOW
from gateway.rebuild.calls import rebuild_call
from gateway.rebuild.histories import workflows_of_type
from gateway.rebuild.mailboxes import MailboxRows, rebuild_mailbox
from gateway.rebuild.outboxes import OutboxRows, rebuild_outbox

log = logging.getLogger(__name__)

# Histories read at once: each is a few requests to Temporal.
READING_AT_ONCE = 8
WRITE_CHUNK = 500


@dataclass
class Rebuilt:
    """What a rebuild wrote, and what it could only read from histories."""

    agents: list[str] = field(default_factory=list)
    events: int = 0
    calls: int = 0
    channels: int = 0
    # Agents whose mailbox gave no account (its host's worker is down): their rows come from
    # their histories, and may lag what the mailbox knows.
    unanswered: list[str] = field(default_factory=list)
    left_out: int = 0  # mailboxes holding nothing this deployment signed


async def rebuild_projection(client: Client, store: Store, cfg: Config) -> Rebuilt:
    """Write what Temporal holds of this deployment into the projection at `store`."""
    key = DeploymentKey.load(cfg.security)
    audio = AudioStore(cfg.voice.audio_root())
    limit = asyncio.Semaphore(READING_AT_ONCE)
    mailbox_runs = await workflows_of_type(client, MAILBOX_WORKFLOW)
    outbox_runs = await workflows_of_type(client, OUTBOX_WORKFLOW)
    call_runs = await workflows_of_type(client, CALL_WORKFLOW)

    async def mailbox(runs: list[WorkflowExecution]) -> MailboxRows | None:
        async with limit:
            return await rebuild_mailbox(client, key, runs)

    async def outbox(runs: list[WorkflowExecution]) -> OutboxRows:
        async with limit:
            return await rebuild_outbox(client, key, runs)

    async def call(runs: list[WorkflowExecution]) -> CallRecord | None:
        async with limit:
            return await rebuild_call(client, key, audio, runs)

    mailboxes = await asyncio.gather(*(mailbox(r) for r in mailbox_runs.values()))
    outboxes = await asyncio.gather(*(outbox(r) for r in outbox_runs.values()))
    calls = await asyncio.gather(*(call(r) for r in call_runs.values()))
    found = [m for m in mailboxes if m is not None]
    events = [e for m in found for e in m.events] + [e for o in outboxes for e in o.events]
    # The projection's order (its seq) is the order the gateway took messages in.
    events.sort(key=lambda e: e.created_at)
    for start in range(0, len(events), WRITE_CHUNK):
        await store.settle_events(events[start : start + WRITE_CHUNK])
    rebuilt = Rebuilt(events=len(events), left_out=len(mailboxes) - len(found))
    for rows in found:
        await store.settle_events([], agent=rows.agent)
        if rows.pane_signed is not None:
            await store.pane_signed(rows.agent.id, rows.pane_signed)
        if (read := read_up_to(rows.events)) is not None:
            await store.advance_read_cursor(rows.agent.id, read)
        rebuilt.agents.append(rows.agent.id)
        if not rows.answered:
            rebuilt.unanswered.append(rows.agent.id)
    for spent in (s for o in outboxes for s in o.spent):
        await store.spend("outbox-item", spent.whose, spent.by, spent.at)
    for record in (c for c in calls if c is not None):
        if await store.get_call(record.id) is None:  # its own workflow's row knows more
            await store.upsert_call(record)
            rebuilt.calls += 1
    rebuilt.channels = await record_configured_channels(cfg, store)
    if rebuilt.agents:
        log.info(
            "projection rebuilt from Temporal: %d agents, %d events (%d read from histories only)",
            len(rebuilt.agents),
            rebuilt.events,
            len(rebuilt.unanswered),
        )
    return rebuilt


async def looks_lost(client: Client, store: Store) -> bool:
    """Whether the projection looks lost: it holds no agent and no event while Temporal holds
    agents' mailboxes (a new deployment holds neither; one mailbox is enough to tell)."""
    if not await store.holds_nothing():
        return False
    async for _ in client.list_workflows(f'WorkflowType = "{MAILBOX_WORKFLOW}"', limit=1):
        return True
    return False


def rebuild_advice(database: str, temporal: str, *, stop: str) -> str:
    """What a process that does not rebuild by itself says of a projection that looks lost: it
    runs beside a Temporal server it did not start, whose namespace other deployments may share
    (reading every mailbox would hold its start up), and an empty database may as well be a
    `database.url` that names the wrong one, which a rebuild would fill without a word."""
    return (
        f"the projection {database} holds no agent and no message while Temporal at {temporal} "
        "holds agents' mailboxes: `agents` and `events` show none of them until it is rebuilt. "
        f"If it was lost or deleted, stop {stop}, run `agentcomms db rebuild` (it makes it "
        "again from Temporal; `--help` says what comes back), and start it again; if not, "
        "check `database.url`."
    )


async def record_configured_channels(cfg: Config, store: Store) -> int:
    """`chat.channels` into the projection, so `channels` lists them beside the others."""
    for channel_id, agent_id in cfg.chat.channels.items():
        provider = channel_id.partition(":")[0]
        await store.upsert_channel(
            Channel(channel_id=channel_id, agent_id=agent_id, provider=provider)
        )
    return len(cfg.chat.channels)


def read_up_to(events: list[Event]) -> str | None:
    """The last message to the agent before the first that still waits: the agent read what
    was typed for it, and check_messages starts after it."""
    last = None
    for event in events:
        if event.direction != "in" or event.type not in MESSAGE_TYPES:
            continue
        if event.status == "new":
            break
        if event.status != "rejected":
            last = event.id
    return last
