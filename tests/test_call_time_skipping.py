"""A call's timers on the time-skipping test server: the ring timeout with its real default."""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.voice import VoiceActivities
from agentcomms.config import Config, VoiceConfig
from agentcomms.store import Store
from agentcomms.trust import DeploymentKey
from agentcomms.workflow_ids import call_workflow_id
from workflows.call import CallInput, CallWorkflow


async def test_nobody_answers_for_30_s_and_the_message_goes_out_another_way(
    time_skipping_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    cfg = Config(voice=VoiceConfig(audio_dir=tmp_path / "audio"))
    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'agentcomms.db'}")
    key = DeploymentKey(b"k" * 40)
    voice = VoiceActivities(cfg, store, key)
    queue = f"tq-{uuid.uuid4()}"
    client = time_skipping_env.client
    try:
        async with Worker(
            client,
            task_queue=queue,
            workflows=[CallWorkflow],
            activities=[
                voice.check_call,
                voice.synthesize_speech,
                voice.record_call,
                voice.send_call_fallback,
            ],
        ):
            call_id = f"c_{uuid.uuid4().hex[:26].upper()}"
            ended = await client.execute_workflow(
                CallWorkflow.run,
                key.sign_call(
                    CallInput(
                        call_id=call_id,
                        agent_id="a",
                        message="The build is red.",
                        ring_timeout_s=cfg.voice.ring_timeout_s,
                        fallback_message=cfg.voice.sms_fallback_message,
                        # The test server's clock has skipped ahead of ours: a call is
                        # checked against the time Temporal started it.
                        placed_at=await time_skipping_env.get_current_time(),
                    )
                ),
                id=call_workflow_id(call_id),
                task_queue=queue,
            )
        assert ended.status == "no-answer" and ended.duration_seconds == 0
        assert ended.reason == "no answer within 30 s"
        [message] = await store.channel_history("cli:local", 10, direction="out")
        assert message.text == (
            "I tried calling but couldn't reach you. Here's my message: The build is red."
        )
        row = await store.get_call(call_id)
        assert row is not None and row.status == "no-answer"
    finally:
        await store.close()
