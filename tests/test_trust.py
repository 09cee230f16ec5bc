"""Only the deployment makes a pane type: events and registrations signed with its key.

A forger here is what anyone who reaches the Temporal port is: a plain Temporal client, with the
SDK's own data converter and no key, signalling ``agent-<id>`` directly. Panes are real tmux
panes (a shell, so a forged command would run), the projection is a real SQLite file.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from uuid import uuid4

import pytest
from pydantic import SecretStr
from temporalio import workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RetryPolicy, WorkflowIDConflictPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.delivery import PaneActivities
from activities.projection import ProjectionActivities
from agentcomms import errors
from agentcomms.approval_models import ApprovalRequest, Decision
from agentcomms.bridge.probe import RECENT_EVENTS_OPTION
from agentcomms.config import SecurityConfig, load_config
from agentcomms.errors import ConfigError
from agentcomms.ids import new_event_id
from agentcomms.models import (
    DeliverRequest,
    DeliveryOutcome,
    Event,
    InterruptRequest,
    ProjectionUpdate,
    Registration,
    Unregister,
)
from agentcomms.store import Store
from agentcomms.trust import KEY_FILENAME, DeploymentKey, request_digest
from agentcomms.workflow_ids import host_task_queue, mailbox_id
from tests.support.home import write_config
from tests.support.mailbox import mailbox_replayer, offline, settled_history
from tests.support.stack import STACK_KEY, Stack, in_mailbox_of, running_stack
from tests.support.tmux import SENT_HEADER, Tmux, as_sent, recorder
from tests.support.waiting import eventually
from workers.main import build_workers
from workflows.mailbox.models import AgentInput, AgentSnapshot
from workflows.mailbox.workflow import AgentWorkflow

KEY = DeploymentKey(b"k" * 40)


def message(agent_id: str, text: str, **fields: object) -> Event:
    data: dict[str, object] = {
        "id": new_event_id(),
        "agent_id": agent_id,
        "channel_id": "cli:local",
        "type": "human_message",
        "role": "human",
        "payload": {"text": text, "source": "cli"},
    }
    return Event.model_validate(data | fields)


# ---- the tag -------------------------------------------------------------------------------------


def test_a_signed_event_verifies_and_an_altered_one_does_not() -> None:
    signed = KEY.sign_event(message("a", "ls"))
    assert KEY.event_is_genuine(signed)
    for change in (
        {"payload": {"text": "rm -rf ~", "source": "cli"}},
        {"agent_id": "b"},
        {"channel_id": "telegram:1"},
        {"type": "interrupt"},
        {"source_agent_id": "mallory"},
        {"created_at": signed.created_at + timedelta(microseconds=1)},
    ):
        assert not KEY.event_is_genuine(signed.model_copy(update=change)), change
    assert not KEY.event_is_genuine(message("a", "ls"))  # no tag at all
    assert not DeploymentKey(b"another key of 32 characters....").event_is_genuine(signed)
    # What the mailbox changes as it goes is not part of what was sent.
    settled = signed.model_copy(update={"status": "delivered", "attempts": 3, "note": "cut"})
    assert KEY.event_is_genuine(settled)


async def test_the_tag_survives_temporal_json_and_the_projection(tmp_path: Path) -> None:
    # Made at +02:00 with a payload value JSON turns into text: the projection gives the time
    # back in UTC, Temporal gives the payload back as JSON.
    event = message(
        "a",
        "héllo \x00 🙂",
        created_at=datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=2))),
    )
    event.payload["sent"] = datetime(2026, 1, 1, tzinfo=UTC)
    signed = KEY.sign_event(event)
    assert KEY.event_is_genuine(Event.model_validate_json(signed.model_dump_json()))
    async with await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'p.db'}") as store:
        await store.record_event(signed)
        back = await store.get_event(signed.id)
    assert back is not None and back.signature == signed.signature
    assert back.created_at.utcoffset() == timedelta(0)
    assert KEY.event_is_genuine(back)


def test_a_registration_is_signed_for_one_agent() -> None:
    reg = KEY.sign_registration("a", Registration(target="s:0.0", host="h"))
    assert KEY.registration_is_genuine("a", reg)
    assert not KEY.registration_is_genuine("b", reg)
    assert not KEY.registration_is_genuine("a", reg.model_copy(update={"target": "evil:0.0"}))
    assert not KEY.registration_is_genuine("a", reg.model_copy(update={"interrupt_key": "Enter"}))
    # Its id and time are signed too: a registration cannot be made newer than it was.
    later = reg.registered_at + timedelta(hours=1) if reg.registered_at else None
    assert not KEY.registration_is_genuine("a", reg.model_copy(update={"registered_at": later}))
    assert not KEY.registration_is_genuine("a", reg.model_copy(update={"id": "another"}))
    # One signed before registrations carried an id and a time is refused: register again.
    old = Registration(target="s:0.0", host="h")
    old.signature = KEY._tag(["agentcomms-registration/1", "a", "tmux", "s:0.0", None, "h"])
    assert not KEY.registration_is_genuine("a", old)


def test_an_answer_is_signed_for_one_request_not_for_its_id() -> None:
    """Two requests that drew the same short id, for the same command (a run Temporal forgot,
    then a new one): an answer signed for the first answers nothing of the second."""
    asked = ApprovalRequest(
        id="K7QF", agent_id="a", tool="Bash", input_text="make deploy", timeout_s=60
    )
    first, second = KEY.sign_approval(asked), KEY.sign_approval(asked)
    assert first.nonce and first.nonce != second.nonce
    allow = Decision(approval_id="K7QF", behavior="allow", by="alice", via="cli")
    answer = KEY.sign_decision(allow, first)
    assert answer.answers == request_digest(first)
    assert KEY.decision_is_genuine(answer, first)
    assert not KEY.decision_is_genuine(answer, second)
    # Nor does naming the second request make it its answer: the name is under the tag.
    renamed = answer.model_copy(update={"answers": request_digest(second)})
    assert not KEY.decision_is_genuine(renamed, second)
    # What the request says is bound too: the same nonce with another command is another request.
    altered = first.model_copy(update={"input_text": "rm -rf ~"})
    assert not KEY.decision_is_genuine(answer, altered)


# ---- the key ---------------------------------------------------------------------------------------


def test_a_key_is_generated_once_into_the_private_home(home: Path) -> None:
    first = DeploymentKey.load(SecurityConfig())
    path = home / KEY_FILENAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert len(path.read_text().strip()) >= 32
    again = DeploymentKey.load(SecurityConfig())
    assert again.event_is_genuine(first.sign_event(message("a", "x")))
    assert "***" in repr(first) and path.read_text().strip() not in repr(first)


def test_processes_starting_together_share_one_generated_key(home: Path) -> None:
    keys: list[DeploymentKey] = []
    threads = [
        threading.Thread(target=lambda: keys.append(DeploymentKey.load(SecurityConfig())))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    signed = keys[0].sign_event(message("a", "x"))
    assert all(k.event_is_genuine(signed) for k in keys)
    assert [p.name for p in home.iterdir() if p.name.startswith(".")] == []  # no temp left


def test_a_key_file_others_can_read_is_refused(home: Path) -> None:
    DeploymentKey.load(SecurityConfig())
    (home / KEY_FILENAME).chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        DeploymentKey.load(SecurityConfig())


def test_a_configured_key_wins_and_a_short_one_is_a_config_error(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHARED_KEY", "s" * 40)
    write_config(home, {"security": {"deployment_key": "${SHARED_KEY}"}})
    cfg = load_config()
    key = DeploymentKey.load(cfg.security)
    assert not (home / KEY_FILENAME).exists()  # nothing generated beside a configured key
    assert DeploymentKey(b"s" * 40).event_is_genuine(key.sign_event(message("a", "x")))
    monkeypatch.setenv("SHARED_KEY", "short-secret")
    with pytest.raises(ConfigError) as err:
        load_config()
    assert "security.deployment_key" in str(err.value) and "at least 32" in str(err.value)
    assert "short-secret" not in str(err.value)


# ---- end to end: a forger with a plain Temporal client ----------------------------------------------


async def forge(client: Client, agent_id: str, signal: str, arg: object) -> None:
    """What anyone who reaches the port can do: signal-with-start the agent's mailbox."""
    await client.start_workflow(
        AgentWorkflow.run,
        AgentInput(agent_id=agent_id),
        id=mailbox_id(agent_id),
        task_queue="anything",
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        start_signal=signal,
        start_signal_args=[arg],
    )


async def rejected(stack: Stack, event_id: str) -> Event:
    event = await eventually(lambda: stack.store.get_event(event_id))
    assert event.status == "rejected", event
    assert "not signed by this deployment" in (event.error or "")
    return event


async def test_a_forged_message_is_never_typed_and_shows_rejected(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    pane = tmux.new_session("sh", "sh")
    await stack.call("register", agent_id=agent, target=pane, socket=tmux.socket)
    proof = tmp_path / "forged-ran"
    forged = message(agent, f"touch {proof} # FORGED")
    await forge(stack.client, agent, "enqueue", forged)
    # The same text, signed with a key that is not the deployment's.
    other_key = message(agent, f"touch {proof} # OTHER KEY")
    await forge(stack.client, agent, "enqueue", KEY.sign_event(other_key))
    # A message the deployment signed, then altered in transit (or in the history).
    altered = DeploymentKey(STACK_KEY.encode()).sign_event(message(agent, "echo fine"))
    altered.payload["text"] = f"touch {proof} # ALTERED"
    await forge(stack.client, agent, "enqueue", altered)
    # A forged interrupt presses no key either.
    interrupt = message(agent, "", type="interrupt", role="system")
    await forge(stack.client, agent, "enqueue", interrupt)

    genuine = await stack.call("send", agent_id=agent, message="echo $((6*7))", wait=True)
    assert genuine["delivered"] is True
    await eventually(lambda: f"{SENT_HEADER}echo $((6*7))" in tmux.capture(pane))
    for event in (forged, other_key, altered, interrupt):
        await rejected(stack, event.id)
    screen = tmux.capture(pane)
    assert "FORGED" not in screen and "OTHER KEY" not in screen and "ALTERED" not in screen
    assert "^C" not in screen
    assert not proof.exists()
    # `agentcomms events` (the socket's `events`) lists them as rejected, without any tag.
    listed = (await stack.call("events", agent_id=agent, limit=10))["events"]
    statuses = {e["id"]: e["status"] for e in listed}
    assert statuses.get(forged.id) == "rejected" and statuses[genuine["event_id"]] == "delivered"
    assert all("signature" not in e for e in listed)
    # A refused forgery says nothing against the pane: the agent stays online.
    state = await stack.gateway.mailbox.snapshot(agent)
    assert state is not None and state.status == "online" and state.pending == 0


async def test_a_forgery_inside_a_backlog_is_refused_and_the_rest_typed_in_order(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    """The backlog is typed several messages to a local activity: a forged one among them is
    refused alone."""
    agent = stack.agent_id()
    sent = [(await stack.call("send", agent_id=agent, message="m0"))["event_id"]]
    forged = message(agent, "FORGED")
    await forge(stack.client, agent, "enqueue", forged)
    for i in range(1, 6):
        sent.append((await stack.call("send", agent_id=agent, message=f"m{i}"))["event_id"])
    target, out = recorder(tmux, tmp_path, "rec")
    await stack.call(
        "register", agent_id=agent, target=target, socket=tmux.socket, submit_delay_ms=0
    )
    expected = as_sent(*(f"m{i}" for i in range(6)))
    await eventually(lambda: out.read_bytes() == expected)
    await rejected(stack, forged.id)
    await stack.call("send", agent_id=agent, message="after", wait=True)  # all settled by then
    expected += as_sent("after")
    for event_id in sent:
        event = await stack.store.get_event(event_id)
        assert event is not None and event.status == "delivered", event
    await asyncio.sleep(0.3)
    assert out.read_bytes() == expected


async def test_an_event_signed_for_another_agent_is_rejected(stack: Stack, tmux: Tmux) -> None:
    agent, other = stack.agent_id("a"), stack.agent_id("b")
    pane = tmux.new_session("cat", "cat")
    await stack.call("register", agent_id=agent, target=pane, socket=tmux.socket)
    theirs = DeploymentKey(STACK_KEY.encode()).sign_event(message(other, "MEANT FOR B"))
    await forge(stack.client, agent, "enqueue", theirs)
    await rejected(stack, theirs.id)
    assert "MEANT FOR B" not in tmux.capture(pane)


async def test_a_forged_registration_is_ignored_and_messages_go_to_the_agents_pane(
    stack: Stack, tmux: Tmux
) -> None:
    agent = stack.agent_id()
    own = tmux.new_session("own", "cat")
    trap = tmux.new_session("trap", "cat")
    await stack.call("register", agent_id=agent, target=own, socket=tmux.socket)
    await forge(
        stack.client,
        agent,
        "register",
        Registration(target=trap, socket=tmux.socket, host=stack.host, submit_delay_ms=0),
    )
    # The mailbox has the worker check a registration's tag before it takes it.
    sent = await stack.call("send", agent_id=agent, message="KEEP ME", wait=True)
    assert sent["delivered"] is True
    assert "KEEP ME" in tmux.capture(own) and "KEEP ME" not in tmux.capture(trap)
    state = await stack.gateway.mailbox.snapshot(agent)
    assert state is not None and state.registration is not None
    assert state.registration.target == own and state.status == "online"


def test_an_unregister_is_signed_for_one_agent_and_one_request() -> None:
    request = KEY.sign_unregister("a", Unregister(id="u1", requested_at=datetime.now(UTC)))
    assert KEY.unregister_is_genuine("a", request)
    assert not KEY.unregister_is_genuine("b", request)
    assert not KEY.unregister_is_genuine("a", request.model_copy(update={"id": "u2"}))
    assert not KEY.unregister_is_genuine("a", Unregister())  # what an unsigned signal carries
    assert not KEY.unregister_is_genuine("a", KEY.sign_unregister("a", Unregister()))


async def test_a_forged_unregister_leaves_the_agent_registered(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    agent = stack.agent_id()
    target, out = recorder(tmux, tmp_path, "rec")
    registration = {"agent_id": agent, "target": target, "socket": tmux.socket}
    await stack.call("register", **registration, submit_delay_ms=0)
    deployment = DeploymentKey(STACK_KEY.encode())

    def request() -> Unregister:
        return Unregister(id=uuid4().hex, requested_at=datetime.now(UTC))

    await forge(stack.client, agent, "unregister", Unregister())  # no tag
    await forge(stack.client, agent, "unregister", KEY.sign_unregister(agent, request()))
    await forge(stack.client, agent, "unregister", deployment.sign_unregister("other", request()))
    for text in ("one", "two"):  # two in turn, as below
        sent = await stack.call("send", agent_id=agent, message=text, wait=True)
        assert sent["delivered"] is True, sent
    state = await stack.gateway.mailbox.snapshot(agent)
    assert state is not None and state.status == "online" and state.registration is not None

    # One the deployment signed is obeyed, once: repeated from the history later, it is not.
    genuine = deployment.sign_unregister(agent, request())
    await forge(stack.client, agent, "unregister", genuine)
    await eventually(lambda: offline(stack, agent))
    await stack.call("register", **registration, submit_delay_ms=0)
    await forge(stack.client, agent, "unregister", genuine)
    # Two in turn: the first may be typed while the unregister is still being checked.
    for text in ("three", "four"):
        sent = await stack.call("send", agent_id=agent, message=text, wait=True)
        assert sent["delivered"] is True, sent
    await stack.call("unregister", agent_id=agent)  # through agentcomms
    await eventually(lambda: offline(stack, agent))
    sent = await stack.call("send", agent_id=agent, message="waits", wait=True, timeout=1)
    assert sent["delivered"] is False
    assert out.read_bytes() == as_sent("one", "two", "three", "four")

    handle = stack.client.get_workflow_handle(mailbox_id(agent))
    history = await eventually(lambda: settled_history(handle))
    await handle.terminate("test over")
    assert (await mailbox_replayer().replay_workflow(history)).replay_failure is None


# ---- one deployment, one key ------------------------------------------------------------------------


async def test_a_worker_with_a_key_of_its_own_refuses_the_deployments_messages(
    temporal_env: WorkflowEnvironment, tmux: Tmux, tmp_path: Path
) -> None:
    """Hosts are one deployment only through one key (`security.deployment_key`, shared through
    the config): a worker that made its own types nothing the gateway signed, and loses nothing
    either: the messages wait, and the agent says why."""
    async with running_stack(temporal_env.client, tmp_path, with_worker=False) as gateway_only:
        cfg = gateway_only.cfg.model_copy(
            update={"security": SecurityConfig(deployment_key=SecretStr("x" * 40))}
        )
        agent = gateway_only.agent_id()
        pane = tmux.new_session("cat", "cat")
        async with AsyncExitStack() as workers:
            for worker in build_workers(
                gateway_only.client, cfg, gateway_only.store, host=gateway_only.host
            ):
                await workers.enter_async_context(worker)
            await gateway_only.call("register", agent_id=agent, target=pane, socket=tmux.socket)
            await gateway_only.call("send", agent_id=agent, message="NOT OURS")
            state = await eventually(lambda: refused_registration(gateway_only, agent))
        assert state.pending == 1 and state.status == "offline"
        assert "not signed by this deployment" in (state.last_error or "")
        assert "security.deployment_key" in (state.last_error or "")
        assert "NOT OURS" not in tmux.capture(pane)


async def refused_registration(stack: Stack, agent: str) -> AgentSnapshot | None:
    """The mailbox's state once a registration was refused and says why, for ``eventually``."""
    state = await stack.gateway.mailbox.snapshot(agent)
    return state if state is not None and state.pending and state.last_error else None


def test_the_key_never_reaches_config_show(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from agentcomms.cli import app

    monkeypatch.setenv("SHARED_KEY", "s3cr3t-" * 8)
    write_config(home, {"security": {"deployment_key": "${SHARED_KEY}"}})
    shown = CliRunner().invoke(app, ["config", "show", "--json"])
    assert shown.exit_code == 0, shown.output
    assert "s3cr3t" not in shown.output
    assert json.loads(shown.output)["security"]["deployment_key"] == "***"
    assert os.environ["SHARED_KEY"] not in shown.output


async def test_an_old_message_signalled_again_is_not_typed_twice(
    tmux: Tmux, tmp_path: Path
) -> None:
    """A copy of a genuine, long-typed message, taken from an old history and signalled again
    once the mailbox and the pane have both forgotten its id: the projection remembers."""
    agent = f"agent-{uuid4().hex[:8]}"
    target, out = recorder(tmux, tmp_path, "rec")
    registration = KEY.sign_registration(
        agent, Registration(target=target, socket=tmux.socket, host="h", submit_delay_ms=0)
    )
    old = datetime.now(UTC) - timedelta(hours=2)
    event = KEY.sign_event(message(agent, "deploy to production", created_at=old))
    request = DeliverRequest(registration=registration, events=[event])
    env = in_mailbox_of(agent)
    async with await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'p.db'}") as store:
        panes = PaneActivities(KEY, store)
        await store.record_event(event)
        assert (await env.run(panes.deliver_to_pane, request))[0].typed  # waited two hours
        delivered = event.model_copy(update={"status": "delivered", "delivered_at": old})
        await store.settle_events([delivered])
        await eventually(lambda: out.read_bytes() == b"[cli:local] deploy to production\r")
        # The pane forgets (a thousand messages later), the mailbox too: the copy arrives.
        tmux.run("set-option", "-p", "-u", "-t", target, RECENT_EVENTS_OPTION)
        [again] = await env.run(panes.deliver_to_pane, request)
        assert not again.typed
        await asyncio.sleep(0.3)
        assert out.read_bytes() == b"[cli:local] deploy to production\r"


@pytest.mark.parametrize(
    "caller",
    [
        {"is_local": False},  # scheduled on the host's task queue by anyone's workflow
        {"workflow_type": "AttackersWorkflow"},  # a local activity of another workflow type
        {"workflow_id": "attack-backend"},  # ... or of a workflow that is no agent's mailbox
    ],
)
async def test_pane_activities_refuse_anyone_but_the_agents_own_mailbox(
    tmux: Tmux, tmp_path: Path, caller: dict[str, object]
) -> None:
    """A genuine signed event and registration, copied from a history, do not make a pane type
    for a caller other than the agent's mailbox, nor press its interrupt key."""
    agent = "backend"
    target, out = recorder(tmux, tmp_path, "rec")
    registration = KEY.sign_registration(
        agent, Registration(target=target, socket=tmux.socket, host="h", submit_delay_ms=0)
    )
    event = KEY.sign_event(message(agent, "COPIED FROM A HISTORY"))
    interrupt = KEY.sign_event(message(agent, "", type="interrupt", role="system"))
    env = in_mailbox_of(agent, **caller)
    async with await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'p.db'}") as store:
        panes = PaneActivities(KEY, store)
        with pytest.raises(ApplicationError) as refused:
            await env.run(
                panes.deliver_to_pane, DeliverRequest(registration=registration, events=[event])
            )
        with pytest.raises(ApplicationError) as refused_key:
            await env.run(
                panes.interrupt_pane, InterruptRequest(registration=registration, event=interrupt)
            )
        for caught in (refused, refused_key):
            assert caught.value.type == errors.NOT_A_MAILBOX and caught.value.non_retryable
        # The same requests, from the mailbox itself, type (so the refusal above is the caller).
        typed = await in_mailbox_of(agent).run(
            panes.deliver_to_pane, DeliverRequest(registration=registration, events=[event])
        )
        assert typed[0].typed
    await eventually(lambda: out.read_bytes() == b"[cli:local] COPIED FROM A HISTORY\r")


async def test_an_activity_scheduled_on_a_hosts_queue_by_an_attackers_workflow_types_nothing(
    stack: Stack, tmux: Tmux, tmp_path: Path
) -> None:
    """An attacker's own worker and workflow, with the stock SDK and a genuine request copied
    from a mailbox's history, schedule the pane activity on the host's queue that the
    deployment's worker polls: it is refused there, and the pane stays as it was."""
    agent = stack.agent_id()
    target, out = recorder(tmux, tmp_path, "rec")
    await stack.call(
        "register", agent_id=agent, target=target, socket=tmux.socket, submit_delay_ms=0
    )
    sent = await stack.call("send", agent_id=agent, message="genuine", wait=True)
    assert sent["delivered"] is True
    # Both signed halves are readable by anyone: the registration in a query, the event in the
    # mailbox's history (here read back from the projection).
    snapshot = await stack.gateway.mailbox.snapshot(agent)
    assert snapshot is not None and snapshot.registration is not None
    event = await stack.store.get_event(sent["event_id"])
    assert event is not None
    forged = DeliverRequest(
        registration=snapshot.registration,
        events=[event.model_copy(update={"id": new_event_id(), "status": "new"})],
    )
    queue = f"attacker-{uuid4().hex[:8]}"
    async with Worker(stack.client, task_queue=queue, workflows=[Attacker]):
        with pytest.raises(WorkflowFailureError) as failed:
            await stack.client.execute_workflow(
                Attacker.run,
                args=[host_task_queue(stack.host), forged],
                id=f"attack-{uuid4().hex[:8]}",
                task_queue=queue,
            )
    activity_failure = failed.value.cause
    assert isinstance(activity_failure, ActivityError)
    refusal = activity_failure.cause
    assert isinstance(refusal, ApplicationError) and refusal.type == errors.NOT_A_MAILBOX
    await asyncio.sleep(0.3)
    assert out.read_bytes() == as_sent("genuine")


@workflow.defn(sandboxed=False)
class Attacker:
    @workflow.run
    async def run(self, host_queue: str, request: DeliverRequest) -> list[DeliveryOutcome]:
        outcomes: list[DeliveryOutcome] = await workflow.execute_activity(
            "deliver_to_pane",
            request,
            result_type=list[DeliveryOutcome],
            task_queue=host_queue,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
        return outcomes


async def test_a_mailbox_writes_to_the_projection_only_what_the_deployment_signed(
    tmp_path: Path,
) -> None:
    """What a mailbox's state or a signal carries in (a forgery, or a message for another agent)
    never reaches the projection as a message: it is written as rejected, and the projection
    writes refuse anyone but agentcomms' own workflows."""
    agent = "backend"
    genuine = KEY.sign_event(message(agent, "genuine")).model_copy(update={"status": "delivered"})
    forged = message(agent, "FORGED, as if Alice said it").model_copy(
        update={"status": "delivered"}
    )
    elsewhere = KEY.sign_event(message("frontend", "for another agent")).model_copy(
        update={"status": "delivered"}
    )
    update = ProjectionUpdate(events=[genuine, forged, elsewhere], waiting=[message(agent, "W")])
    async with await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'p.db'}") as store:
        projection = ProjectionActivities(store, KEY)
        scheduled = in_mailbox_of(agent, is_local=False)
        with pytest.raises(ApplicationError) as refused:
            await scheduled.run(projection.record_projection, update)
        assert refused.value.type == errors.NOT_LOCAL and refused.value.non_retryable
        assert await store.get_event(genuine.id) is None
        await in_mailbox_of(agent).run(projection.record_projection, update)
        stored = await store.get_event(genuine.id)
        assert stored is not None and stored.status == "delivered"
        shown = await store.get_event(forged.id)
        assert shown is not None and shown.status == "rejected"
        assert "not signed by this deployment" in (shown.error or "")
        waiting = await store.get_event(update.waiting[0].id)
        assert waiting is not None and waiting.status == "rejected"
        misplaced = await store.get_event(elsewhere.id)
        assert misplaced is not None and misplaced.status == "rejected"
