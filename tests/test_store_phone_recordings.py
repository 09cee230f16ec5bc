"""Messages left by phone, kept by their recording (SQLite, and PostgreSQL when
AGENTCOMMS_TEST_DATABASE_URL is set): one waiting, one the gateway fetches again (listed for a
restarted gateway, never pruned while it is), one marked done whether or not it waited, and
whether one began for a call's prompt."""

from __future__ import annotations

from datetime import timedelta

from agentcomms.models import utcnow
from agentcomms.store import Store
from agentcomms.store.phone_recordings import PhoneRecording


def _left(call: str) -> PhoneRecording:
    return PhoneRecording(call, "+15557654321", "backend", f"https://api.example/{call}", 3)


async def test_a_recording_fetched_again_is_listed_until_done(store: Store) -> None:
    since = utcnow()
    await store.keep_recording("RE1", _left("CA1"), since)
    await store.keep_recording("RE2", _left("CA2"), since, fetching=True)
    waiting = await store.recording("RE1")
    assert waiting is not None and (waiting.done, waiting.fetching_since) == (False, None)
    fetching = await store.recordings_fetching()
    assert list(fetching) == ["RE2"]
    assert fetching["RE2"].fetching_since == since and fetching["RE2"].url.endswith("CA2")
    assert not fetching["RE2"].done

    await store.mark_done("RE2", utcnow(), lost=True)
    assert await store.recordings_fetching() == {}
    lost = await store.recording("RE2")
    assert lost is not None and (lost.done, lost.lost, lost.fetching_since) == (True, True, None)
    assert (lost.agent, lost.turn) == ("backend", 3)  # what it was is kept


async def test_a_recording_posted_at_once_is_marked_done_without_waiting(store: Store) -> None:
    assert await store.recording("RE3") is None
    await store.mark_done("RE3", utcnow())
    done = await store.recording("RE3")
    assert done is not None and (done.done, done.lost) == (True, False)


async def test_a_recording_began_for_one_prompt_of_one_call(store: Store) -> None:
    await store.keep_recording("RE7", _left("CA7"), utcnow())
    assert await store.recording_began("CA7", 3)
    assert not await store.recording_began("CA7", 4)  # a later prompt: hung up before the beep
    assert not await store.recording_began("CA8", 3)


async def test_old_rows_are_pruned_but_not_one_still_fetched(store: Store) -> None:
    long_ago = utcnow() - timedelta(days=2)
    await store.keep_recording("RE4", _left("CA4"), long_ago)
    await store.keep_recording("RE5", _left("CA5"), long_ago, fetching=True)
    await store.keep_recording("RE6", _left("CA6"), utcnow())  # its keeping prunes
    assert await store.recording("RE4") is None
    assert list(await store.recordings_fetching()) == ["RE5"]
