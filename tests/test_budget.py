"""An agent's hourly budget: calls placed, SMS and WhatsApp messages sent, and escalation
ladders that text or call are counted per agent and hour in the projection, and one past the
budget is refused, saying which budget, where it is set and when the next hour begins. The
counting is tried on a real database; each spending is then refused once through the gateway's
socket, as an agent's MCP server asks (calls, texts through Twilio's stand-in, an urgent
message's ladder, a request's ladder), and `config init` writes the defaults."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.cli.config_cmd import starter_config
from agentcomms.config import AgentConfig, Config
from agentcomms.config.budget import Budget, Spending
from agentcomms.errors import GatewayError
from agentcomms.escalation_models import Rung
from agentcomms.store import Store
from gateway.agents.budget import Budgets
from gateway.socket.protocol import BUDGET_SPENT
from tests.fakes.serve import free_port
from tests.fakes.twilio import FakeTwilio
from tests.support.chat import ALICE, with_twilio
from tests.support.stack import Stack, running_stack
from tests.support.waiting import eventually

NOW = datetime(2026, 12, 7, 5, 40, tzinfo=UTC)


async def test_each_agents_spending_is_counted_by_the_hour_and_refused_past_its_budget(
    store: Store,
) -> None:
    cfg = Config(
        budget=Budget(calls=2, texts=1, ladders=0),
        agents={"frugal": AgentConfig(target="dev:0.1", budget=Budget(calls=1))},
    )
    now = NOW
    budgets = Budgets(cfg, store, clock=lambda: now)
    # (agent, what it spends, why it is refused: None when it is not)
    steps: list[tuple[str, Spending, str | None]] = [
        ("backend", "calls", None),
        ("backend", "calls", None),
        (
            "backend",
            "calls",
            "backend has spent its hourly budget of 2 calls (budget.calls); the next hour "
            "begins at 06:00 UTC, in 20 minutes",
        ),
        ("backend", "texts", None),  # each kind is counted on its own
        ("backend", "texts", "backend has spent its hourly budget of 1 SMS and WhatsApp messages"),
        ("backend", "ladders", "backend has spent its hourly budget of 0 escalation ladders"),
        ("other", "calls", None),  # each agent on its own
        ("frugal", "calls", None),
        (
            "frugal",
            "calls",
            "frugal has spent its hourly budget of 1 calls (agents.frugal.budget.calls)",
        ),
    ]
    for agent, what, refused in steps:
        got = await budgets.refusal(agent, what)
        assert (got is None) == (refused is None), (agent, what, got)
        assert got is None or refused is None or got.startswith(refused), got
    with pytest.raises(Exception, match="hourly budget of 2 calls") as raised:
        await budgets.spend("backend", "calls")
    assert getattr(raised.value, "code", None) == BUDGET_SPENT
    # A new hour, a new budget.
    now = NOW + timedelta(minutes=20)
    assert await budgets.refusal("backend", "calls") is None


def test_config_init_writes_the_budgets_defaults() -> None:
    written = starter_config()["budget"]
    assert written.pop("//").startswith("What each agent may spend in an hour")
    assert written == Budget().model_dump() == {"calls": 10, "texts": 30, "ladders": 10}


@pytest.fixture
async def stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, twilio: FakeTwilio, agent: str
) -> AsyncIterator[Stack]:
    sms = with_twilio(twilio, agent, free_port())

    def configure(cfg: Config) -> Config:
        cfg = sms(cfg)
        return cfg.model_copy(
            update={
                "budget": Budget(calls=1, texts=1, ladders=0),
                "escalation": [Rung(after_s=0, via="call")],
            }
        )

    async with running_stack(temporal_env.client, tmp_path, configure=configure) as s:
        yield s


async def _refused_or_busy(stack: Stack, agent: str) -> str | None:
    """The budget's refusal of a call, or None while the phone is still on the first call."""
    try:
        busy = await stack.call("call", agent_id=agent, message="Deploy now?", wait=False)
    except GatewayError as exc:
        assert exc.code == BUDGET_SPENT
        return str(exc)
    assert busy["status"] == "busy", busy
    return None


async def test_an_agent_past_its_budget_is_refused_with_the_reason(
    stack: Stack, agent: str
) -> None:
    async def refused(method: str, **params: object) -> str:
        with pytest.raises(GatewayError) as raised:
            await stack.call(method, **params)
        assert raised.value.code == BUDGET_SPENT
        return str(raised.value)

    # Calls: the first rings the local phone and is hung up (the ringing stops then, not at
    # the ring timeout), the second is refused (not told the phone is busy: the human's
    # phone takes one call at a time).
    placed = await stack.call("call", agent_id=agent, message="Deploy?", wait=False)
    assert placed["status"] == "ringing"
    ended = await stack.call("call_end", call_id=placed["call_id"], agent_id=agent)
    assert (ended["status"], ended["reason"]) == (
        "canceled",
        "the agent ended it before the call was taken",
    )
    why = await eventually(lambda: _refused_or_busy(stack, agent))
    assert why.startswith(f"{agent} has spent its hourly budget of 1 calls (budget.calls)")

    # Texts: one SMS goes, the next is refused before anything is queued.
    sms = f"sms:{ALICE}"
    await stack.call("reply", agent_id=agent, channel_id=sms, message="one")
    why = await refused("reply", agent_id=agent, channel_id=sms, message="two")
    assert "hourly budget of 1 SMS and WhatsApp messages (budget.texts)" in why
    # The terminal costs nothing: it is not counted.
    await stack.call("reply", agent_id=agent, channel_id="cli:local", message="three")

    # Ladders (none may climb here): the urgent message is sent, only its ladder is refused.
    urgent = await stack.call(
        "reply", agent_id=agent, channel_id="cli:local", message="Prod is down.", urgent=True
    )
    assert urgent["escalation"] is None and urgent["event_id"]
    assert urgent["note"].startswith(
        f"no escalation ladder: {agent} has spent its hourly budget of 0 escalation ladders "
        "that text or call (budget.ladders)"
    )

    # A request past the ladder budget still opens, for the chats, the console and the
    # terminal, and its ladder never rings.
    opened = await stack.call(
        "approval_open",
        kind="claude-code",
        agent_id=agent,
        tool_name="Bash",
        tool_input={"command": "make deploy"},
    )
    assert opened["note"].startswith(f"no ladder: {agent} has spent its hourly budget of 0")
    listed = (await stack.call("approvals"))["approvals"]
    assert opened["id"] in [a["id"] for a in listed]
    assert (await stack.call("trace", event_id=opened["id"]))["rungs"] == []
