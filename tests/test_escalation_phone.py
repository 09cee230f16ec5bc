"""A permission request's call rung on the local phone (`agentcomms phone`, spoken here through
its protocol one step at a time): a digit typed at its prompt decides the request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, VoiceConfig
from agentcomms.escalation_models import Rung
from tests.support.phone import Phone
from tests.support.stack import running_stack
from tests.support.waiting import eventually


async def test_a_digit_typed_at_the_local_phone_decides(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    def configure(cfg: Config) -> Config:
        return cfg.model_copy(update={"escalation": [Rung(after_s=0, via="call")]})

    voice = VoiceConfig(audio_dir=tmp_path / "audio")
    async with running_stack(
        temporal_env.client, tmp_path, voice=voice, configure=configure
    ) as stack:
        agent = stack.agent_id("backend")
        opened = await stack.call(
            "approval_open",
            kind="claude-code",
            agent_id=agent,
            tool_name="Bash",
            tool_input={"command": "rm -rf build"},
        )
        phone = Phone(stack)
        call_id = await phone.answer()
        asked = await phone.prompt(call_id)
        assert asked["say"] == (
            f"{agent} asks to run: rm -rf build. Press 1 to allow, 2 to deny, 3 to hear it again."
        )
        assert asked["approval_id"] == opened["id"]
        await phone.event(call_id, "heard", turn=asked["turn"], text="3")
        again = await phone.until(
            lambda line: line["expect"] == "answer" and line["turn"] > asked["turn"]
        )
        assert again["say"] == asked["say"]
        await phone.event(call_id, "heard", turn=again["turn"], text="1")

        async def decided() -> dict[str, Any] | None:
            waited: dict[str, Any] = await stack.call("approval_wait", id=opened["id"], wait_s=5)
            return waited if waited["status"] == "decided" else None

        waited = await eventually(decided, timeout=30)
        assert (waited["behavior"], waited["decided_via"]) == ("allow", "call")
        assert waited["decided_by"] == "the local phone"
        # The call says how it was decided, then hangs up.
        goodbye = await phone.until(lambda line: line["expect"] == "played")
        assert goodbye["say"] == "Done: allowed. Goodbye."
