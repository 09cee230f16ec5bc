from __future__ import annotations

import pytest
from ulid import ULID

from agentcomms.ids import is_event_id, new_event_id, provider_event_id


def test_new_event_id_is_evt_and_a_ulid() -> None:
    event_id = new_event_id()
    assert event_id.startswith("evt_")
    assert str(ULID.from_str(event_id[4:])) == event_id[4:]
    assert is_event_id(event_id)


def test_new_event_ids_are_unique() -> None:
    assert len({new_event_id() for _ in range(1000)}) == 1000


def test_provider_event_id_is_stable() -> None:
    first = provider_event_id("telegram", "42", "1001")
    # Same message re-sent (e.g. Telegram after a restart): same id, also across processes,
    # so pin one value: a change here would turn every re-sent message into a new event.
    assert provider_event_id("telegram", "42", "1001") == first
    assert first == "evt_4VCVTYXQYBXSWVYV7TSNCNK6DN"
    assert is_event_id(first)


def test_provider_event_id_treats_numbers_and_text_alike() -> None:
    assert provider_event_id("telegram", 42, 1001) == provider_event_id("telegram", "42", "1001")


@pytest.mark.parametrize(
    "other",
    [
        ("discord", "42", "1001"),
        ("telegram", "43", "1001"),
        ("telegram", "42", "1002"),
        ("telegram", "421", "001"),
    ],
)
def test_provider_event_id_differs_for_other_messages(other: tuple[str, str, str]) -> None:
    assert provider_event_id(*other) != provider_event_id("telegram", "42", "1001")


def test_provider_event_id_is_not_fooled_by_separators() -> None:
    assert provider_event_id("a:b", "c", "d") != provider_event_id("a", "b:c", "d")
    assert provider_event_id("a", "b|c", "d") != provider_event_id("a", "b", "c|d")
    assert provider_event_id("a", 'b","c', "d") != provider_event_id("a", "b", 'c","d')


@pytest.mark.parametrize(
    "value",
    [
        None,
        42,
        "",
        "evt_",
        "01ARZ3NDEKTSV4RRFFQ69G5FAV",  # no prefix
        "msg_01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "evt_01ARZ3NDEKTSV4RRFFQ69G5FA",  # 25 characters
        "evt_01ARZ3NDEKTSV4RRFFQ69G5FAVX",  # 27 characters
        "evt_01arz3ndektsv4rrffq69g5fav",  # lowercase: a second spelling of one id
        "evt_01ARZ3NDEKTSV4RRFFQ69G5FAU",  # U is not in the alphabet
        "evt_0IARZ3NDEKTSV4RRFFQ69G5FAV",  # I is an alias, not canonical
        "evt_81ARZ3NDEKTSV4RRFFQ69G5FAV",  # more than 128 bits
    ],
)
def test_is_event_id_rejects(value: object) -> None:
    assert not is_event_id(value)


def test_is_event_id_accepts_the_largest_ulid() -> None:
    assert is_event_id("evt_7ZZZZZZZZZZZZZZZZZZZZZZZZZ")
