"""A listener whose port another program holds (a second deployment on this machine, say): one
line naming the setting to change, and the process goes on without that listener."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest

from agentcomms.address import port_problem
from agentcomms.errors import ListenerUnavailable
from agentcomms.metrics import MetricsServer
from gateway.http import WebhookServer
from gateway.service import _listening


@pytest.fixture
def held() -> Iterator[int]:
    """A port another program listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_port_is_free_taken_or_not_this_machines(held: int) -> None:
    assert port_problem("127.0.0.1", _free_port()) is None
    assert port_problem("127.0.0.1", 0) is None  # the system picks one
    assert port_problem("127.0.0.1", held) == "Address already in use"
    assert port_problem("192.0.2.1", 8235) == "Cannot assign requested address"  # TEST-NET-1
    unknown = port_problem("no-such-host.invalid", 8235)
    assert unknown is not None and unknown.startswith("no-such-host.invalid is not an address")


async def test_a_webhook_or_console_listener_on_a_taken_port_is_one_line_and_left_out(
    held: int, caplog: pytest.LogCaptureFixture
) -> None:
    console = WebhookServer(
        "127.0.0.1",
        held,
        [],
        what="the console",
        settings="console.port (or console.enabled: false)",
    )
    with caplog.at_level(logging.WARNING, logger="gateway.service"):
        started = await _listening(console.start, "the console is not served")

    assert started is False
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == (
        f"the console cannot listen on 127.0.0.1:{held} (Address already in use): set "
        "console.port (or console.enabled: false); going on without it: the console is not served"
    )
    await console.close()  # nothing was started: nothing to stop


def test_metrics_on_a_taken_port_name_their_setting(held: int) -> None:
    metrics = MetricsServer(f"127.0.0.1:{held}")

    with pytest.raises(ListenerUnavailable) as raised:
        metrics.start()

    assert str(raised.value) == (
        f"metrics cannot listen on 127.0.0.1:{held} (Address already in use): set "
        "metrics.address (or leave it unset for no metrics)"
    )
