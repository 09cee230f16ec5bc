"""A host's worker given another deployment key than the gateway's: the panes registered under
the old one are refused, and the worker's log says so in one line per refusal, not a traceback."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest
from pydantic import SecretStr
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from agentcomms import errors
from agentcomms.config import Config, SecurityConfig
from agentcomms.errors import GatewayError
from tests.support.stack import Stack, register_recorder, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually
from workers.main import build_workers

OTHER_KEY = "another deployment's key, thirty-two characters or more"


@asynccontextmanager
async def host_workers(stack: Stack, cfg: Config) -> AsyncIterator[None]:
    """The stack's host workers, running under `cfg` (its key), stopped at the end."""
    async with AsyncExitStack() as running:
        for worker in build_workers(stack.client, cfg, stack.store, host=stack.host):
            await running.enter_async_context(worker)
        yield


async def _unreachable(stack: Stack, agent: str) -> bool:
    row = await stack.store.get_agent(agent)
    return row is not None and row.status == "unreachable"


def _is_refusal(record: logging.LogRecord) -> bool:
    exc = record.exc_info[1] if record.exc_info else None
    while exc is not None and not isinstance(exc, ApplicationError):
        exc = exc.__cause__
    return isinstance(exc, ApplicationError) and exc.type == errors.REGISTRATION_NOT_SIGNED


async def test_a_pane_registered_under_another_key_is_refused_in_one_line(
    temporal_env: WorkflowEnvironment,
    tmux: Tmux,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with running_stack(temporal_env.client, tmp_path, with_worker=False) as stack:
        agent = stack.agent_id("rekeyed")
        async with host_workers(stack, stack.cfg):
            await register_recorder(stack, tmux, tmp_path, agent)
            assert (await stack.call("send", agent_id=agent, message="before", wait=True))[
                "delivered"
            ]
        rekeyed = stack.cfg.model_copy(
            update={"security": SecurityConfig(deployment_key=SecretStr(OTHER_KEY))}
        )
        with caplog.at_level(logging.INFO):
            async with host_workers(stack, rekeyed):
                await stack.call("send", agent_id=agent, message="after")
                await eventually(lambda: _unreachable(stack, agent), timeout=20)
        refusals = [r for r in caplog.records if "refused to type" in r.getMessage()]
        assert refusals and all(r.levelno == logging.WARNING for r in refusals)
        row = await stack.store.get_agent(agent)
        assert row is not None and "register" in (row.last_error or ""), row
        # The refusal is said once, by us; the SDK's "Completing activity as failed" with the
        # error's traceback is not logged for it at the level the worker logs at.
        tracebacks = [r for r in caplog.records if r.levelno >= logging.INFO and _is_refusal(r)]
        assert not tracebacks, [r.getMessage() for r in tracebacks]


async def test_an_answer_refused_by_a_worker_with_another_key_says_so(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with running_stack(temporal_env.client, tmp_path, with_worker=False) as stack:
        rekeyed = stack.cfg.model_copy(
            update={"security": SecurityConfig(deployment_key=SecretStr(OTHER_KEY))}
        )
        async with host_workers(stack, rekeyed):
            opened = await stack.call(
                "approval_open", kind="claude-code", agent_id=stack.agent_id("asking"),
                tool_name="Bash", tool_input={"command": "make deploy"},
            )  # fmt: skip
            with pytest.raises(GatewayError) as refused:
                await stack.call(
                    "approval_decide", id=opened["id"], behavior="allow", by="alice", via="cli"
                )
        assert "different deployment keys" in str(refused.value), refused.value
        assert "security.deployment_key" in str(refused.value)
