"""The pane activities: bridge errors become the ApplicationError types the mailbox branches on,
and what is typed is derived from the signed event and registration alone.

Called through ``ActivityEnvironment`` as the agent's mailbox calls them (a local activity of
``agent-<id>``); the mailbox tests run them as local activities of the real workflow.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from activities.delivery import PaneActivities
from agentcomms import errors
from agentcomms.models import (
    DeliverRequest,
    DeliveryOutcome,
    Event,
    InterruptRequest,
    PaneTarget,
    Registration,
)
from agentcomms.store import Store
from agentcomms.trust import DeploymentKey
from tests.support.events import message
from tests.support.stack import in_mailbox_of
from tests.support.tmux import Recorder, Tmux, start_recorder

KEY = DeploymentKey(b"d" * 40)
AGENT = "backend"


@pytest.fixture
async def panes(tmp_path: Path) -> AsyncIterator[PaneActivities]:
    async with await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'p.db'}") as store:
        yield PaneActivities(KEY, store)


def registration(pane: PaneTarget, **fields: object) -> Registration:
    data: dict[str, object] = {"target": pane.target, "socket": pane.socket, "host": "h"}
    return KEY.sign_registration(AGENT, Registration.model_validate(data | fields))


def signed(text: str = "hello", **fields: Any) -> Event:
    return KEY.sign_event(message(AGENT, "cli:local", text, **fields))


def deliver(pane: PaneTarget, *events: Event) -> DeliverRequest:
    return DeliverRequest(
        registration=registration(pane, submit_delay_ms=20), events=list(events) or [signed()]
    )


def interrupt(pane: PaneTarget, key: str = "Escape") -> InterruptRequest:
    event = signed("", type="interrupt", role="system")
    return InterruptRequest(registration=registration(pane, interrupt_key=key), event=event)


async def test_deliver_types_once(recorder: Recorder, panes: PaneActivities) -> None:
    env = in_mailbox_of(AGENT)
    request = deliver(recorder.pane, signed("hi $HOME;"))
    [first] = await env.run(panes.deliver_to_pane, request)
    [again] = await env.run(panes.deliver_to_pane, request)
    typed = "[cli:local] hi $HOME;"  # the header from the signed event, then its text
    assert first == DeliveryOutcome(event_id=request.events[0].id, typed=True, chars=len(typed))
    assert not again.typed
    assert await recorder.settled() == typed.encode() + b"\r"


async def test_what_is_typed_is_the_signed_event_and_the_signed_pane(
    recorder: Recorder, panes: PaneActivities, tmux: Tmux
) -> None:
    """An event altered after signing is rejected alone; a registration pointed at another
    pane after signing types nowhere."""
    env = in_mailbox_of(AGENT)
    altered = signed("echo fine")
    altered.payload["text"] = "rm -rf ~"
    genuine = signed("echo genuine")
    outcomes = await env.run(panes.deliver_to_pane, deliver(recorder.pane, altered, genuine))
    assert outcomes[0].rejected and "not signed by this deployment" in outcomes[0].rejected
    assert outcomes[1].typed
    assert await recorder.settled() == b"[cli:local] echo genuine\r"
    other = tmux.new_session("other", "cat")
    moved = deliver(recorder.pane, signed("to the other pane"))
    moved.registration = moved.registration.model_copy(update={"target": other})
    with pytest.raises(ApplicationError) as refused:
        await env.run(panes.deliver_to_pane, moved)
    assert refused.value.type == errors.REGISTRATION_NOT_SIGNED
    assert "to the other pane" not in tmux.capture(other)


async def test_interrupt_presses_once(recorder: Recorder, panes: PaneActivities) -> None:
    env = in_mailbox_of(AGENT)
    req = interrupt(recorder.pane)
    assert await env.run(panes.interrupt_pane, req)
    assert not await env.run(panes.interrupt_pane, req)
    assert await recorder.settled() == b"\x1b"


async def test_missing_pane_is_retryable_pane_not_found(
    tmux: Tmux, tmp_path: Path, panes: PaneActivities
) -> None:
    env = in_mailbox_of(AGENT)
    tmux.new_session("other")
    for pane in (
        PaneTarget(target="gone:0.0", socket=tmux.socket),
        PaneTarget(target="main", socket=str(tmp_path / "no-server")),
    ):
        with pytest.raises(ApplicationError) as caught:
            await env.run(panes.deliver_to_pane, deliver(pane))
        assert caught.value.type == errors.PANE_NOT_FOUND
        assert not caught.value.non_retryable
        # The mailbox's everyday business: one line of ours, not the SDK's traceback each look.
        assert caught.value.category == ApplicationErrorCategory.BENIGN
        with pytest.raises(ApplicationError) as caught:
            await env.run(panes.interrupt_pane, interrupt(pane))
        assert caught.value.type == errors.PANE_NOT_FOUND
        assert caught.value.category == ApplicationErrorCategory.BENIGN


async def test_a_pane_in_a_dialog_is_not_ready_and_nothing_is_typed(
    tmux: Tmux, tmp_path: Path, panes: PaneActivities
) -> None:
    pane = await start_recorder(
        tmux, tmp_path / "typed.bin", screen=" Do you want to proceed?\n \u276f 1. Yes\n   2. No"
    )
    request = deliver(pane.pane).model_copy(update={"look": "dialogs"})
    with pytest.raises(ApplicationError) as caught:
        await in_mailbox_of(AGENT).run(panes.deliver_to_pane, request)
    assert caught.value.type == errors.PANE_NOT_READY
    assert caught.value.details == ("dialog",)
    assert caught.value.non_retryable  # the mailbox waits for the agent, not the SDK's retry
    assert caught.value.category == ApplicationErrorCategory.BENIGN
    assert await pane.settled(0.1) == b""


async def test_bad_key_or_target_is_non_retryable_invalid_target(
    recorder: Recorder, panes: PaneActivities
) -> None:
    env = in_mailbox_of(AGENT)
    bad_key = interrupt(recorder.pane, key="C-c Enter")
    bad_target = deliver(PaneTarget(target="main;", socket=recorder.pane.socket))
    with pytest.raises(ApplicationError) as key_error:
        await env.run(panes.interrupt_pane, bad_key)
    with pytest.raises(ApplicationError) as target_error:
        await env.run(panes.deliver_to_pane, bad_target)
    for caught in (key_error, target_error):
        assert caught.value.type == errors.INVALID_TARGET
        assert caught.value.non_retryable
        # A real error: the SDK logs it with its traceback (only our refusals are benign).
        assert caught.value.category != ApplicationErrorCategory.BENIGN
    assert await recorder.settled(0.1) == b""


async def test_other_tmux_failure_is_tmux_failed(tmp_path: Path, panes: PaneActivities) -> None:
    pane = PaneTarget(target="main", socket=str(tmp_path / ("s" * 200)))  # path too long for tmux
    with pytest.raises(ApplicationError, match="File name too long") as caught:
        await in_mailbox_of(AGENT).run(panes.deliver_to_pane, deliver(pane))
    assert caught.value.type == errors.TMUX_FAILED
    assert not caught.value.non_retryable
    assert caught.value.category != ApplicationErrorCategory.BENIGN  # logged with its traceback
