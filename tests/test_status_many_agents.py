"""`status` and `doctor` with many agents: each line still reads as a sentence, saying how many
agents are in each state and naming a few, rather than a line naming every agent (measured
with 1,000 agents: a status line of 15,084 characters, doctor lines of 7,000).
Real Temporal, real SQLite, the CLI as a process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.models import Agent
from tests.support.cli import cli
from tests.support.home import cli_home
from tests.support.stack import running_stack

MANY = 300
# Far below what MANY names take (each id is about 14 characters), far above a few names.
LONGEST_LINE = 600


@pytest.mark.timeout(180)
async def test_status_and_doctor_sum_up_many_agents(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with running_stack(temporal_env.client, tmp_path, with_worker=False) as stack:
        home = cli_home(tmp_path, stack)
        quiet = [stack.agent_id(f"q{i:03d}") for i in range(MANY)]
        busy = stack.agent_id("busy")
        # Registered on a host with no worker and no pane looked at from here: only the rows.
        for agent_id in [*quiet, busy]:
            row = Agent(
                id=agent_id,
                target="far:0.0",
                host="far-host",
                status="online",
                state="busy" if agent_id == busy else "unknown",
            )
            await stack.store.settle_events([], agent=row)

        status = await cli(home, "status")
        assert status.returncode == 0, status.stderr
        longest = max(status.stdout.splitlines(), key=len)
        assert len(longest) < LONGEST_LINE, longest[:200]
        line = next(line for line in status.stdout.splitlines() if "Agent states" in line)
        states = line.partition("Agent states")[2].strip()
        # The rare state first, with its agent; the many counted, a few of them named.
        assert states.startswith(f"1 busy: {busy}; {MANY} unknown: {quiet[0]}, "), states
        assert states.endswith(f" and {MANY - 10} more"), states
        # The whole list is still there for a script.
        report = json.loads((await cli(home, "status", "--json")).stdout)
        assert len(report["gateway"]["agent_states"]) == MANY + 1

        doctor = await cli(home, "doctor")
        longest = max(doctor.stdout.splitlines(), key=len)
        assert len(longest) < LONGEST_LINE, longest[:200]
        # The host whose worker is missing, and the agents no hook reported for, named in short.
        assert f"host far-host has no worker for its agents {busy}, {quiet[0]}, " in doctor.stdout
        assert f"no hook has reported for {quiet[0]}, " in doctor.stdout
        assert f"and {MANY - 10} more (hooks missing?)" in doctor.stdout


def test_a_few_agents_are_each_named_with_their_state() -> None:
    from agentcomms.cli.status import describe_states

    assert describe_states({"backend": "busy", "docs": "ready"}) == "backend busy, docs ready"
    assert describe_states({}) is None
