"""`metrics.address`: one endpoint with our counters and the Temporal SDK's own metrics, scraped
while real messages flow (real Temporal, tmux, SQLite)."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import MailboxConfig, TemporalConfig
from agentcomms.errors import GatewayError
from agentcomms.metrics import MetricsServer, free_loopback_address, temporal_runtime
from agentcomms.temporal import connect
from tests.support.raw_http import knock
from tests.support.stack import running_stack
from tests.support.tmux import Tmux, as_sent, recorder
from tests.support.waiting import eventually, typed

# A scrape's samples by name and labels.
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(address: str) -> Samples:
    def get() -> str:
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as r:
            text: str = r.read().decode()
            return text

    samples: Samples = {}
    for family in text_string_to_metric_families(await asyncio.to_thread(get)):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.mark.timeout(180)
async def test_scraped_counters_match_what_was_sent(
    temporal_env: WorkflowEnvironment, tmux: Tmux, tmp_path: Path
) -> None:
    sdk_address = free_loopback_address()
    client = await connect(
        TemporalConfig(address=temporal_env.client.service_client.config.target_host),
        runtime=temporal_runtime(sdk_address),
    )
    server = MetricsServer(free_loopback_address(), sdk_address=sdk_address)
    server.start()
    try:
        async with running_stack(client, tmp_path, mailbox=MailboxConfig(max_pending=1)) as stack:
            before = await scrape(server.address)
            online = stack.agent_id("online")
            target, out = recorder(tmux, tmp_path, "rec")
            await stack.call(
                "register", agent_id=online, target=target, socket=tmux.socket, submit_delay_ms=0
            )
            for text in ("one", "two", "three"):
                sent = await stack.call("send", agent_id=online, message=text, wait=True)
                assert sent["delivered"], sent
            await typed(out, as_sent("one", "two", "three"))
            offline = stack.agent_id("offline")
            await stack.call("send", agent_id=offline, message="waits")
            with pytest.raises(GatewayError, match="mailbox is full"):
                await stack.call("send", agent_id=offline, message="refused")

            async def settled() -> Samples | None:
                now = await scrape(server.address)
                pending = value(now, "agentcomms_mailbox_pending", agent=offline)
                return now if pending == 1 else None

            after = await eventually(settled)

            def delta(name: str, **labels: str) -> float:
                return value(after, name, **labels) - value(before, name, **labels)

            assert delta("agentcomms_messages_accepted_total", channel_kind="cli") == 4
            assert delta("agentcomms_messages_delivered_total") == 3
            assert delta("agentcomms_delivery_seconds_count") == 3
            assert delta("agentcomms_delivery_seconds_sum") > 0
            assert delta("agentcomms_messages_rejected_total", reason="mailbox_full") == 1
            assert value(after, "agentcomms_mailbox_pending", agent=online) == 0
            # The Temporal SDK's own metrics, from the same endpoint.
            assert any(name.startswith("temporal_") for name, _ in after), sorted(after)[:20]
    finally:
        await server.close()


async def test_a_rebinding_page_reads_no_metrics() -> None:
    """The agents' names and queues are on `/metrics`: a web page that rebinds its own name to
    this port (its Host is its own) gets 403, a scraper naming the listener gets the metrics."""
    server = MetricsServer(free_loopback_address(), names=["scraper.lan"])
    server.start()
    port = int(server.address.rsplit(":", 1)[1])
    try:
        for headers in (
            {"Host": f"evil.example:{port}"},
            {"Host": "evil.example"},
            {"Host": f"127.0.0.1:{port}", "Origin": "http://evil.example"},
        ):
            answer = await knock(port, "/metrics", headers, method="GET")
            assert answer.status == 403, headers
            assert "agentcomms_" not in answer.text
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"scraper.lan:{port}"):
            answer = await knock(port, "/metrics", {"Host": host}, method="GET")
            assert answer.status == 200, host
            assert "agentcomms_messages_accepted" in answer.text
    finally:
        await server.close()
