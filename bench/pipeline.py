"""The bare Temporal pipeline the mailbox is measured against, and the direct tmux send.

One ``BarePipeline`` workflow per agent: its signal queues the text, its loop types each text
through ONE activity (ordinary or local, per the input) that runs ONE tmux invocation,
``send-keys -l -- TEXT ; send-keys Enter``. No projection, no probe, no de-duplication: the least
Temporal can do per message, so the mailbox's overhead is the difference.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from pydantic import BaseModel, Field
from temporalio import activity, workflow


class Pane(BaseModel):
    target: str
    socket: str


class TypeText(BaseModel):
    pane: Pane
    text: str


class BareInput(BaseModel):
    pane: Pane
    local: bool  # type through a local activity (True) or an ordinary one (False)
    pending: list[str] = Field(default_factory=list)  # carried across continue-as-new


def send_keys_argv(pane: Pane, text: str) -> list[str]:
    """One tmux invocation that types `text` literally and presses Enter (text must not end in ';')."""
    return [
        "tmux",
        "-S",
        pane.socket,
        "send-keys",
        "-t",
        pane.target,
        "-l",
        "--",
        text,
        ";",
        "send-keys",
        "-t",
        pane.target,
        "Enter",
    ]


async def send_keys(pane: Pane, text: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        *send_keys_argv(pane, text),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"tmux send-keys failed: {err.decode(errors='replace').strip()}")


@activity.defn(name="bench_type_text")
async def type_text(req: TypeText) -> None:
    await send_keys(req.pane, req.text)


@workflow.defn(name="BarePipeline")
class BarePipeline:
    @workflow.init
    def __init__(self, input: BareInput) -> None:
        self._pending = list(input.pending)

    @workflow.signal
    def enqueue(self, text: str) -> None:
        self._pending.append(text)

    @workflow.run
    async def run(self, input: BareInput) -> None:
        info = workflow.info()
        while True:
            await workflow.wait_condition(
                lambda: bool(self._pending) or info.is_continue_as_new_suggested()
            )
            if info.is_continue_as_new_suggested():
                break
            req = TypeText(pane=input.pane, text=self._pending[0])
            if input.local:
                await workflow.execute_local_activity(
                    type_text, req, start_to_close_timeout=timedelta(seconds=10)
                )
            else:
                await workflow.execute_activity(
                    type_text, req, start_to_close_timeout=timedelta(seconds=10)
                )
            self._pending.pop(0)
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(input.model_copy(update={"pending": self._pending}))
