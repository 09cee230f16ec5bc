"""A forged hook report changes nothing: anyone who reaches Temporal can signal a mailbox's
`report` with the stock `temporal` CLI, and a "ready" (a Stop) from them would have messages
typed while the agent is busy or has a dialog open. The gateway signs what the agent's hooks
say; the mailbox applies only what it signed, and `trace` shows what it ignored. A stand-in
agent in a real tmux pane, its hooks through the gateway's socket, a real Temporal mailbox."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from agentcomms import errors
from agentcomms.workflow_ids import host_task_queue, mailbox_id
from tests.support.attacker import refusals_of_attacks, temporal_cli
from tests.support.fake_agent import PROMPT, ready_agent, state_is
from tests.support.stack import Stack
from tests.support.tmux import Tmux, as_sent
from tests.support.waiting import eventually

# Long enough for a message that was going to be typed to have been (a delivery takes ms).
QUIET_S = 1.5


async def test_a_forged_ready_report_types_nothing_and_shows_in_trace(
    temporal_env: WorkflowEnvironment, stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent_id, fake = await ready_agent(stack, tmux, tmp_path)
    await fake.hook("UserPromptSubmit", prompt="please run the migration")
    await eventually(lambda: state_is(stack, agent_id, "busy"))
    # The pane itself looks ready (a status line lags the hooks): only the hooks hold it back.
    await fake.showing(PROMPT)
    sent = await stack.call("send", agent_id=agent_id, message="and then delete the backups")
    await asyncio.sleep(QUIET_S)
    assert fake.typed() == b""

    # The attack: a Stop report dated after every genuine one, as the stock CLI sends it.
    forged = {"kind": "claude-code", "event": "Stop", "at_ns": time.time_ns() + 10**12}
    temporal_cli(
        temporal_env,
        "signal", "-w", mailbox_id(agent_id), "--name", "report", "--input", json.dumps(forged),
    )  # fmt: skip

    async def traced_refusal() -> list[str] | None:
        why: list[str] = (await stack.call("trace", event_id=sent["event_id"]))["why"]
        return why if any("not signed by this deployment were ignored" in w for w in why) else None

    why = await eventually(traced_refusal)
    assert any(f"waits because {agent_id} is busy" in w for w in why), why
    assert fake.typed() == b""
    assert await state_is(stack, agent_id, "busy")
    # The agent's own Stop, through the gateway, still counts: the forged date shut nothing out.
    await fake.hook("Stop", last_assistant_message="done")
    await eventually(lambda: fake.typed() == as_sent("and then delete the backups"))


async def test_the_report_check_and_the_recall_scheduled_by_an_attackers_workflow_answer_nothing(
    stack: Stack,
) -> None:
    """An attacker's own worker and workflow schedule the new mailbox activities on the host's
    queue: the tag check (whose "yes" would be theirs to use) and the recall (which reads what
    an agent was typed) run only inside an agent's mailbox."""
    report = {"kind": "claude-code", "event": "Stop", "at_ns": time.time_ns()}
    refused = await refusals_of_attacks(
        stack.client,
        host_task_queue(stack.host),
        [("check_report", report), ("recall_mailbox", {"agent_id": "backend"})],
        workflow_id=mailbox_id("backend"),  # named like the agent's mailbox, to no avail
    )
    assert [r.type for r in refused] == [errors.NOT_A_MAILBOX, errors.NOT_LOCAL]
