"""The escalation ladder and quiet hours in the config: read per agent or for all, and a mistake
named with what to do; quiet hours' spans, midnight included."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentcomms.config import load_config
from agentcomms.errors import ConfigError
from agentcomms.escalation_models import QuietHours
from tests.support.home import write_config

LADDER = [
    {"after_s": 0, "via": "chat"},
    {"after_s": 120, "via": "sms"},
    {"after_s": 300, "via": "call"},
]
AGENT = {"target": "work:0.0"}


def test_a_ladder_for_all_and_one_agent_of_its_own(home: Path) -> None:
    write_config(
        home,
        {
            "escalation": LADDER,
            "quiet_hours": {"from": "22:00", "to": "07:00", "tz": "Europe/Berlin"},
            "agents": {
                "backend": AGENT,
                "ops": {
                    **AGENT,
                    "escalation": [{"after_s": 0, "via": "call"}],
                    "never_sleep": True,
                },
            },
        },
    )
    cfg = load_config()
    rungs, quiet, never_sleeps = cfg.escalation_for("backend")
    assert [(r.after_s, r.via) for r in rungs] == [(0, "chat"), (120, "sms"), (300, "call")]
    assert quiet is not None and (quiet.start, quiet.end, quiet.tz) == (
        "22:00",
        "07:00",
        "Europe/Berlin",
    )
    assert not never_sleeps
    rungs, _, never_sleeps = cfg.escalation_for("ops")
    assert [r.via for r in rungs] == ["call"] and never_sleeps
    assert cfg.escalation_for("nobody")[0] == cfg.escalation


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        (
            {"escalation": [{"after_s": 300, "via": "call"}, {"after_s": 120, "via": "sms"}]},
            "the sms rung (after_s 120) comes before the call rung above it (after_s 300)",
        ),
        ({"escalation": [{"after_s": 0, "via": "pager"}]}, "'chat', 'sms', 'push' or 'call'"),
        (
            {"escalation": [{"after_s": -1, "via": "sms"}]},
            "escalation[0].after_s: expected a number >= 0.0, got -1",
        ),
        ({"quiet_hours": {"from": "25:00", "to": "07:00"}}, "expected a time of day as HH:MM"),
        (
            {"quiet_hours": {"from": "22:00", "to": "07:00", "tz": "Mars/Olympus"}},
            "unknown time zone",
        ),
        ({"quiet_hours": {"from": "22:00", "until": "07:00"}}, "until"),
    ],
)
def test_a_mistake_is_named(home: Path, config: dict[str, object], problem: str) -> None:
    write_config(home, config)
    with pytest.raises(ConfigError) as excinfo:
        load_config()
    assert problem in str(excinfo.value)


def _at(hh: int, mm: int = 0) -> datetime:
    return datetime(2026, 12, 2, hh, mm, tzinfo=UTC)


def test_quiet_hours_across_midnight_end_the_next_morning() -> None:
    night = QuietHours.model_validate({"from": "22:00", "to": "07:00"})
    assert night.over_at(_at(23)) == datetime(2026, 12, 3, 7, tzinfo=UTC)
    assert night.over_at(_at(3)) == _at(7)
    assert night.over_at(_at(7)) is None
    assert night.over_at(_at(12)) is None


def test_quiet_hours_in_a_time_zone() -> None:
    lunch = QuietHours.model_validate({"from": "12:00", "to": "13:00", "tz": "Europe/Berlin"})
    # 11:30 UTC is 12:30 in Berlin in December: quiet until 13:00 there, 12:00 UTC.
    assert lunch.over_at(_at(11, 30)) == _at(12)
    assert lunch.over_at(_at(12, 30)) is None


@pytest.mark.parametrize(
    ("inbound", "problem"),
    [
        ({"allowed_callers": ["+15551234567"]}, "allowed_callers needs a pin as well"),
        ({"allowed_callers": ["5551234"], "pin": "2468"}, "expected a number as +15551234567"),
        ({"allowed_callers": ["+15551234567"], "pin": "12ab"}, "expected 4 to 12 digits"),
    ],
)
def test_calling_in_needs_listed_numbers_and_a_pin(
    home: Path, inbound: dict[str, object], problem: str
) -> None:
    write_config(home, {"voice": {"inbound": inbound}})
    with pytest.raises(ConfigError) as excinfo:
        load_config()
    assert problem in str(excinfo.value)
    assert "12ab" not in str(excinfo.value)  # a PIN is a secret, even a wrong one
