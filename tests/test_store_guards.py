"""What the projection remembers against restarts, on a real database (SQLite, and PostgreSQL
when one is configured): signed inputs used once, strangers' hourly counts, what a mailbox
started afresh reads back, which chat message shows which approval, wrong PINs counted
across calls, and the human's phone held by one call at a time."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentcomms.models import Agent, CallRecord, CallStatus
from agentcomms.store import Store
from agentcomms.store.approval_posts import POSTS_KEPT, ApprovalPost
from agentcomms.store.guards import WrongPin
from tests.support.events import message

NOW = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)


async def test_an_input_is_spent_by_the_first_to_ask_and_by_no_one_else(store: Store) -> None:
    assert await store.spend("call", "c_1", "run-a", NOW) == "run-a"
    assert await store.spend("call", "c_1", "run-a", NOW) == "run-a"  # its own retry
    assert await store.spend("call", "c_1", "run-b", NOW) == "run-a"  # a copy, refused
    assert await store.spend("outbox-item", "c_1", "run-b", NOW) == "run-b"  # another kind


def _call(call_id: str, status: CallStatus = "dialing", *, phone: str = "+15550001") -> CallRecord:
    return CallRecord(
        id=call_id, agent_id="backend", status=status, phone_number=phone, started_at=NOW
    )


async def test_the_humans_phone_is_claimed_by_one_call_at_a_time(store: Store) -> None:
    since = NOW - timedelta(minutes=1)
    claims = [store.claim_line(_call(f"c_{n}"), since=since) for n in range(5)]
    busy = await asyncio.gather(*claims)
    (holder,) = [f"c_{n}" for n, b in enumerate(busy) if b is None]  # all asked at once
    assert set(busy) == {None, holder}
    assert await store.claim_line(_call(holder), since=since) is None  # its own rung, again
    assert await store.claim_line(_call("c_x", phone="local"), since=since) is None  # another
    held: list[tuple[CallStatus, bool]] = [
        ("ringing", False),
        ("in-progress", False),
        ("no-answer", True),
    ]
    for status, free in held:
        await store.upsert_call(_call(holder, status))
        assert (await store.claim_line(_call("c_9"), since=since) is None) is free, status
    # A call still shown up past its longest life (its worker died) holds the phone no longer.
    await store.upsert_call(_call("c_stuck", "in-progress", phone="+15550002"))
    assert await store.claim_line(_call("c_8", phone="+15550002"), since=NOW) is None


async def test_an_agents_newest_signed_pane_change_only_moves_forward(store: Store) -> None:
    assert await store.newest_pane_signed("backend") is None
    later = NOW + timedelta(microseconds=1)
    await store.pane_signed("backend", later)
    await store.pane_signed("backend", NOW)  # an older one, recorded late: kept as it was
    assert _utc(await store.newest_pane_signed("backend")) == later
    await store.pane_signed("backend", later + timedelta(hours=1))
    assert _utc(await store.newest_pane_signed("backend")) == later + timedelta(hours=1)
    assert await store.newest_pane_signed("frontend") is None


async def test_the_newest_signed_pane_is_read_while_another_process_writes(
    tmp_path: Path,
) -> None:
    """Asked before every delivery: the read takes no write lock, so a write held elsewhere
    (the gateway's, the CLI's) does not hold the typing up for the busy timeout (10 s)."""
    path = tmp_path / "agentcomms.db"
    async with await Store.open(f"sqlite+aiosqlite:///{path}") as store:
        await store.pane_signed("backend", NOW)
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process's write, under way
            newest = await asyncio.wait_for(store.newest_pane_signed("backend"), timeout=3)
        finally:
            other.execute("ROLLBACK")
            other.close()
    assert _utc(newest) == NOW


async def test_the_newest_signed_pane_is_read_while_this_process_waits_to_write(
    tmp_path: Path,
) -> None:
    """With another process holding the write lock, this store's own write waits out the busy
    timeout (10 s) in its writer thread; the read before a delivery does not queue behind it."""
    path = tmp_path / "agentcomms.db"
    async with await Store.open(f"sqlite+aiosqlite:///{path}") as store:
        await store.pane_signed("backend", NOW)
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            waiting_write = asyncio.create_task(store.pane_signed("frontend", NOW))
            await asyncio.sleep(0.2)  # the write is in the writer thread, in the busy wait
            assert not waiting_write.done()
            newest = await asyncio.wait_for(store.newest_pane_signed("backend"), timeout=3)
        finally:
            other.execute("ROLLBACK")
            other.close()
        await waiting_write  # and the write goes through once the lock is free
        assert _utc(await store.newest_pane_signed("frontend")) == NOW
    assert _utc(newest) == NOW


def _utc(moment: datetime | None) -> datetime | None:
    # SQLite hands a time back without its zone; it was written in UTC.
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


async def test_stranger_counts_stop_at_the_first_limit_and_count_nothing_then(
    store: Store,
) -> None:
    limits = {"rows": 3, "row:sms:+1": 2}
    taken = [await store.take_stranger_cost(7, limits) for _ in range(3)]
    assert taken == [None, None, "row:sms:+1"]
    # The sender's refusal counted nothing: another sender still has the hour's third row.
    assert await store.take_stranger_cost(7, {"rows": 3, "row:sms:+2": 2}) is None
    assert await store.take_stranger_cost(7, {"rows": 3, "row:sms:+3": 2}) == "rows"
    await store.give_back_stranger_cost(7, "rows")
    assert await store.take_stranger_cost(7, {"rows": 3}) is None
    # A new hour starts again, and the hours long gone are dropped.
    assert await store.take_stranger_cost(9, limits) is None


CALLER = "+15557654321"
LOCKOUT = timedelta(minutes=30)


def _at(minutes: float) -> datetime:
    return NOW + timedelta(minutes=minutes)


# (minutes after NOW, what happens: "wrong" or "right" PIN, or "asks" whether it is locked out),
# then what the store answers: a WrongPin, or for "asks" the lockout's end (None: not locked).
PIN_STORIES: dict[str, list[tuple[float, str, WrongPin | datetime | None]]] = {
    "the third wrong PIN in a row locks the number out, once": [
        (0, "wrong", WrongPin(1, None)),
        (1, "wrong", WrongPin(2, None)),
        (2, "asks", None),
        (3, "wrong", WrongPin(3, _at(33), locked_now=True)),
        (4, "asks", _at(33)),
        # Asked before the lockout began, a call keys another: counted no more, locked still.
        (5, "wrong", WrongPin(0, _at(33))),
        (32, "asks", _at(33)),
    ],
    "the lockout ends, and the count starts afresh": [
        (0, "wrong", WrongPin(1, None)),
        (1, "wrong", WrongPin(2, None)),
        (2, "wrong", WrongPin(3, _at(32), locked_now=True)),
        (32, "asks", None),
        (33, "wrong", WrongPin(1, None)),
        (34, "wrong", WrongPin(2, None)),
        (35, "wrong", WrongPin(3, _at(65), locked_now=True)),
    ],
    "the right PIN forgets the wrong ones before it": [
        (0, "wrong", WrongPin(1, None)),
        (1, "wrong", WrongPin(2, None)),
        (2, "right", None),
        (3, "wrong", WrongPin(1, None)),
        (4, "wrong", WrongPin(2, None)),
        (5, "asks", None),
    ],
    "a day without a wrong PIN forgets the ones before": [
        (0, "wrong", WrongPin(1, None)),
        (1, "wrong", WrongPin(2, None)),
        (1 + 24 * 60 + 1, "wrong", WrongPin(1, None)),
    ],
}


@pytest.mark.parametrize("story", list(PIN_STORIES))
async def test_wrong_pins_are_counted_across_calls_by_number(store: Store, story: str) -> None:
    for minutes, what, expected in PIN_STORIES[story]:
        now = _at(minutes)
        if what == "wrong":
            got: object = await store.wrong_pin(CALLER, now, tries=3, lockout=LOCKOUT)
        elif what == "right":
            await store.right_pin(CALLER)
            got = None
        else:
            got = await store.pin_locked_until(CALLER, now)
        assert got == expected, f"{story}: at +{minutes} min, {what}"
    # Another number's PINs were never this one's business.
    assert await store.pin_locked_until("+15550001111", _at(4)) is None


async def test_a_mailbox_started_afresh_reads_back_the_newest_pane_and_recent_deliveries(
    store: Store,
) -> None:
    assert await store.pane_changed_at("backend") is None
    agent = Agent(id="backend", status="online", pane_changed_at=NOW)
    now = datetime.now(UTC)
    typed = message("backend", text="typed", status="delivered", created_at=now)
    old = message("backend", text="old", status="delivered", created_at=now - timedelta(hours=1))
    waiting = message("backend", text="waiting", created_at=now)
    other = message("frontend", text="theirs", status="delivered", created_at=now)
    await store.settle_events([typed, old, other], agent=agent)
    await store.record_event(waiting)
    assert await store.pane_changed_at("backend") == NOW
    assert await store.typed_since("backend", now - timedelta(minutes=10), 100) == [typed.id]


async def test_an_approvals_posts_are_handed_over_once(store: Store) -> None:
    telegram = ApprovalPost(provider="telegram", chat_id="456", message_id="7")
    sms = ApprovalPost(provider="sms", chat_id="+15551234567", message_id="SM1")
    for post in (telegram, sms):
        await store.record_approval_post("K7QF", post, NOW)
    await store.record_approval_post("M3XR", telegram, NOW)
    await store.drop_approval_post("K7QF", "sms", "+15551234567")  # answered in that chat
    assert await store.take_approval_posts("K7QF") == [telegram]
    assert await store.take_approval_posts("K7QF") == []  # a second decider edits nothing
    assert await store.take_approval_posts("M3XR") == [telegram]  # another approval's, kept


async def test_posts_no_decision_took_are_dropped_in_time(store: Store) -> None:
    post = ApprovalPost(provider="discord", chat_id="99", message_id="1")
    await store.record_approval_post("OLD2", post, NOW - POSTS_KEPT - timedelta(minutes=1))
    await store.record_approval_post("NEW3", post, NOW)
    assert await store.take_approval_posts("OLD2") == []
    assert await store.take_approval_posts("NEW3") == [post]
