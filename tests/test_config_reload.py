"""`config reload`: what every part reads when it acts changes at once, in a running gateway;
what was read once to open something is named with the restart it needs; a file that does not
read changes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import AgentConfig, Config
from agentcomms.errors import ConfigError, GatewayError
from gateway.reload import changed_keys
from gateway.socket.protocol import CONFIG_INVALID
from tests.support.stack import running_stack
from tests.support.tmux import Tmux, recorder
from tests.support.waiting import eventually

ONE_TOKEN = {"telegram": {"token": "123:one"}}


@pytest.mark.parametrize(
    ("after", "keys"),
    [
        ({"chat": ONE_TOKEN}, []),
        ({"chat": {**ONE_TOKEN, "channels": {"telegram:1": "a"}}}, ["chat.channels"]),
        ({"chat": {**ONE_TOKEN, "allowed_senders": {"telegram": ["7"]}}}, ["chat.allowed_senders"]),
        ({"chat": ONE_TOKEN, "agents": {"a": {"target": "s:0.0"}}}, ["agents"]),
        ({"chat": ONE_TOKEN, "temporal": {"address": "10.0.0.1:7233"}}, ["temporal"]),
        # A token changed is a change, named by its key alone.
        ({"chat": {"telegram": {"token": "123:other"}}}, ["chat.telegram"]),
    ],
    ids=["same", "channels", "senders", "agents", "temporal", "a-secret"],
)
def test_a_reload_names_each_key_that_changed(after: dict[str, Any], keys: list[str]) -> None:
    before = Config.model_validate({"chat": ONE_TOKEN})
    assert changed_keys(before, Config.model_validate(after)) == keys


async def test_channels_senders_and_agents_change_live_and_the_rest_waits_for_a_restart(
    temporal_env: WorkflowEnvironment, tmp_path: Path, tmux: Tmux
) -> None:
    target, typed = recorder(tmux, tmp_path, "rec")
    edited: list[Config | ConfigError] = []

    def load() -> Config:  # the file as the human last saved it
        last = edited[-1]
        if isinstance(last, ConfigError):
            raise last
        return last

    async with running_stack(temporal_env.client, tmp_path, load=load) as stack:
        new = stack.cfg.model_copy(deep=True)
        new.chat.channels = {"telegram:42": "backend"}
        new.chat.allowed_senders = {"telegram": ["7"]}
        new.agents = {"backend": AgentConfig(target=target, socket=tmux.socket, submit_delay_ms=0)}
        new.temporal = new.temporal.model_copy(update={"namespace": "elsewhere"})
        edited.append(new)

        done = await stack.call("config_reload")

        assert done == {
            "applied": ["agents", "chat.allowed_senders", "chat.channels"],
            "needs_restart": ["temporal"],
        }
        channels = (await stack.call("channels"))["channels"]
        assert {"channel_id": "telegram:42", "agent_id": "backend"}.items() <= next(
            c for c in channels if c["channel_id"] == "telegram:42"
        ).items()
        senders = (await stack.call("senders"))["senders"]
        assert {"provider": "telegram", "sender_id": "7"}.items() <= senders[0].items()
        # The agent the file added is registered: a message to it is typed into its pane.
        await stack.call("send", agent_id="backend", message="hello after reload", wait=True)
        await eventually(lambda: "hello after reload" in typed.read_text(errors="replace"))
        # What needs a restart was not applied: the running parts still agree.
        assert stack.cfg.temporal.namespace != "elsewhere"

        edited.append(ConfigError("config.json: chat.channels: expected an object"))
        with pytest.raises(GatewayError) as refused:
            await stack.call("config_reload")
        assert refused.value.code == CONFIG_INVALID
        assert "nothing changed" in str(refused.value) and "chat.channels" in str(refused.value)
        assert stack.cfg.chat.channels == {"telegram:42": "backend"}
