"""`agents` says how many messages wait while a backlog is being typed, not the count from when
the typing began (measured before: 2,000 shown for minutes while hundreds had been typed).
Real Temporal, real tmux, real SQLite, through the gateway socket."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.stack import Stack, register
from tests.support.tmux import Tmux, recorder
from tests.support.waiting import eventually

BACKLOG = 6


async def pending(stack: Stack, agent: str) -> int | None:
    """What `agents` shows waiting for `agent`; None until it lists the agent (its mailbox
    writes its row a moment after the first message)."""
    listed = (await stack.call("agents", include_offline=True))["agents"]
    return next((a["pending"] for a in listed if a["id"] == agent), None)


@pytest.mark.timeout(120)
async def test_agents_counts_down_while_a_backlog_is_typed(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    for i in range(BACKLOG):  # while no pane is registered: they wait
        await stack.call("send", agent_id=agent, message=f"m{i}")

    async def all_wait() -> bool:
        return await pending(stack, agent) == BACKLOG

    await eventually(all_wait, timeout=20)
    target, out = recorder(tmux, tmp_path, "rec")
    # A second before each Enter: the backlog takes seconds to type, one message at a time.
    await register(stack, agent, tmux, target, submit_delay_ms=1000)

    async def typed_count() -> int:
        return out.read_bytes().count(b"\r")

    # Part of the backlog typed and part still waiting: the count says so, as it goes.
    async def partway() -> tuple[int, int] | None:
        waiting, typed = await pending(stack, agent), await typed_count()
        if waiting is None or not (0 < waiting < BACKLOG and typed < BACKLOG):
            return None
        return waiting, typed

    waiting, typed = await eventually(partway, timeout=60, interval=0.1)
    assert waiting >= BACKLOG - typed - 1, (waiting, typed)  # at most one typed, not yet recorded

    async def drained() -> bool:
        return await typed_count() == BACKLOG and await pending(stack, agent) == 0

    await eventually(drained, timeout=60, interval=0.2)
