"""An approval by SMS and WhatsApp (through Twilio's webhooks, signed as Twilio signs them, and
the real `twilio` SDK sending to a local Messages API): the request with a code to reply with,
"Reply YES K7QF or NO K7QF"; a reply carrying the code, in any case, is the answer and never
reaches the agent's pane; "NO K7QF" with words denies with them as the reason; "ALWAYS K7QF"
allows for the session; an unknown or already-decided code is answered saying so; after the
decision every chat shown the request is told how it ended, and a stranger's code changes
nothing."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from agentcomms.config import AgentConfig, Config
from agentcomms.ids import provider_event_id
from tests.fakes.serve import free_port
from tests.fakes.twilio import FakeTwilio
from tests.support.chat import ALICE, STRANGER, Hooks, with_twilio
from tests.support.hooks import SESSION_SUGGESTION, open_approval, open_question
from tests.support.stack import Stack, register_recorder, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually
from workflows.approval.client import Approvals

WHATSAPP_ALICE = f"whatsapp:{ALICE}"
BOB = "+15557654321"


def _request_to(twilio: FakeTwilio, to: str, approval: str) -> str | None:
    return next((b for b in twilio.bodies_to(to) if f"YES {approval}" in b), None)


async def test_a_reply_with_the_code_decides_and_never_reaches_the_pane(
    twilio_stack: tuple[Stack, Hooks], twilio: FakeTwilio, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    stack, hooks = twilio_stack
    out = await register_recorder(stack, tmux, tmp_path, agent)
    approval = await open_approval(stack, agent)
    request = await eventually(lambda: _request_to(twilio, ALICE, approval))
    assert request.startswith(f"{agent} asks to use Bash:\ntouch done.txt\n\n")
    assert f"Reply YES {approval} or NO {approval}" in request
    assert f"ALWAYS {approval}" in request
    assert await eventually(lambda: _request_to(twilio, WHATSAPP_ALICE, approval))

    answer, sid = await hooks.texts(
        ALICE, f"no {approval.lower()} not before the release", profile_name="Alice"
    )
    assert f"{approval}: denied by Alice on SMS" in answer
    waited = await stack.call("approval_wait", id=approval, wait_s=10)
    assert waited["decision"] == {"behavior": "deny", "message": "not before the release"}
    assert (waited["decided_by"], waited["decided_via"]) == ("Alice", "sms")
    # The WhatsApp chat is told; the SMS chat heard it as the answer to its reply, once.
    told = f"{approval} ({agent}, Bash): denied by Alice on SMS"
    await eventually(lambda: told in twilio.bodies_to(WHATSAPP_ALICE))
    recorded = await stack.store.get_event(provider_event_id("sms", ALICE, sid))
    assert recorded is not None and (recorded.type, recorded.status) == ("system", "delivered")
    assert recorded.payload["approval_id"] == approval

    # Already decided, from WhatsApp: told who did. An unknown code: told there is none.
    late, _ = await hooks.texts(ALICE, f"YES {approval}", whatsapp=True)
    assert f"{approval} was answered already: denied by Alice on SMS" in late
    unknown, _ = await hooks.texts(ALICE, "YES ZZ9Z")
    assert "There is no approval ZZ9Z" in unknown
    # Words that only look like a code go to the agent, behind nothing the replies typed.
    await hooks.texts(ALICE, "no more tests please")
    await eventually(lambda: out.read_bytes().endswith(b"no more tests please\r"))
    assert out.read_bytes() == f"[sms:{ALICE} from {ALICE}] no more tests please\r".encode()
    assert twilio.bodies_to(ALICE).count(told) == 0


async def test_always_allows_for_the_session_where_offered(
    twilio_stack: tuple[Stack, Hooks], twilio: FakeTwilio, agent: str
) -> None:
    stack, hooks = twilio_stack
    plain = await open_approval(stack, agent, session=False)
    request = await eventually(lambda: _request_to(twilio, ALICE, plain))
    assert "ALWAYS" not in request
    refused, _ = await hooks.texts(ALICE, f"ALWAYS {plain}")
    assert f"{plain} offers nothing for the session" in refused
    assert (await stack.call("approval_wait", id=plain, wait_s=0.5)) == {"status": "open"}

    approval = await open_approval(stack, agent)
    await eventually(lambda: _request_to(twilio, WHATSAPP_ALICE, approval))
    answer, _ = await hooks.texts(ALICE, f"Always {approval}", whatsapp=True, profile_name="Alice")
    assert f"{approval}: allowed for the session by Alice on WhatsApp" in answer
    waited = await stack.call("approval_wait", id=approval, wait_s=10)
    assert waited["decision"] == {"behavior": "allow", "updatedPermissions": [SESSION_SUGGESTION]}
    told = f"{approval} ({agent}, Bash): allowed for the session by Alice on WhatsApp"
    await eventually(lambda: told in twilio.bodies_to(ALICE))
    assert told not in twilio.bodies_to(WHATSAPP_ALICE)


async def test_a_strangers_code_changes_nothing_and_is_recorded(
    twilio_stack: tuple[Stack, Hooks], twilio: FakeTwilio, agent: str
) -> None:
    stack, hooks = twilio_stack
    approval = await open_approval(stack, agent)
    await eventually(lambda: _request_to(twilio, ALICE, approval))
    answer, sid = await hooks.texts(STRANGER, f"YES {approval}")
    assert f"Only the agent's approvers may answer {approval}: nothing changed." in answer
    assert (await stack.call("approval_wait", id=approval, wait_s=0.5)) == {"status": "open"}
    recorded = await stack.store.get_event(provider_event_id("sms", STRANGER, sid))
    assert recorded is not None and recorded.status == "rejected"
    assert recorded.payload["text"] == f"YES {approval}"


async def test_approvers_narrow_who_may_answer_by_text(
    temporal_env: WorkflowEnvironment, tmp_path: Path, twilio: FakeTwilio, agent: str
) -> None:
    port = free_port()

    def configure(cfg: Config) -> Config:
        cfg = with_twilio(twilio, agent, port)(cfg)
        # Bob's number is allowed and listed, but mapped to no agent: his own chat.
        allowed = {**cfg.chat.allowed_senders, "sms": [ALICE, BOB]}
        chat = cfg.chat.model_copy(update={"allowed_senders": allowed})
        only = AgentConfig(target="nowhere:0.0", approvers=[WHATSAPP_ALICE, f"sms:{BOB}"])
        return cfg.model_copy(update={"agents": {agent: only}, "chat": chat})

    async with running_stack(temporal_env.client, tmp_path, configure=configure) as stack:
        hooks = Hooks(twilio, port)
        approval = await open_approval(stack, agent)
        await eventually(lambda: _request_to(twilio, ALICE, approval))
        by_sms, sid = await hooks.texts(ALICE, f"YES {approval}")
        assert f"Only the agent's approvers may answer {approval}" in by_sms
        refused = await stack.store.get_event(provider_event_id("sms", ALICE, sid))
        assert refused is not None and refused.status == "rejected"
        assert refused.error == f"sms:{ALICE} is not one of {agent}'s approvers"
        assert (await stack.call("approval_wait", id=approval, wait_s=0.5)) == {"status": "open"}
        by_bob, _ = await hooks.texts(BOB, f"YES {approval}")
        assert f"{approval}: allowed by {BOB} on SMS" in by_bob
        by_whatsapp, _ = await hooks.texts(ALICE, f"NO {approval}", whatsapp=True)
        assert f"{approval} was answered already: allowed by {BOB} on SMS" in by_whatsapp


async def test_a_plan_by_text_and_a_question_sent_to_the_terminal(
    twilio_stack: tuple[Stack, Hooks], twilio: FakeTwilio, agent: str
) -> None:
    stack, hooks = twilio_stack
    plan = await stack.call(
        "approval_open",
        kind="claude-code",
        agent_id=agent,
        tool_name="ExitPlanMode",
        tool_input={"plan": "# Plan\n1. Add the endpoint"},
    )
    request = await eventually(lambda: _request_to(twilio, ALICE, plan["id"]))
    assert request.startswith(f"{agent} asks to carry out its plan:\n# Plan\n1. Add the endpoint")
    answer, _ = await hooks.texts(ALICE, f"NO {plan['id']} tests first", profile_name="Alice")
    assert f"{plan['id']}: sent back to planning by Alice on SMS" in answer
    waited = await stack.call("approval_wait", id=plan["id"], wait_s=10)
    assert waited["decision"] == {"behavior": "deny", "message": "tests first"}

    question = await open_question(
        stack, agent, ["red", "blue"], question="Which colour?", header="Colour", several=False
    )
    texted = await eventually(
        lambda: next((b for b in twilio.bodies_to(ALICE) if question in b), None)
    )
    assert texted.startswith(f"{agent} asks: Which colour?\n1. red\n2. blue")
    assert f"Reply ANSWER {question} followed by an option's number or label" in texted
    answer, _ = await hooks.texts(ALICE, f"YES {question}")
    assert f"{question} is a question: Reply ANSWER {question}" in answer
    assert (await stack.call("approval_wait", id=question, wait_s=0.5)) == {"status": "open"}
    # By the option's number; a question's own words would be taken as they are.
    answer, _ = await hooks.texts(ALICE, f"answer {question} 2", profile_name="Alice")
    assert f"{question}: answered 'blue' by Alice on SMS" in answer
    view = await Approvals(stack.client, stack.cfg.temporal.task_queue).view(question)
    assert view is not None and view.decision is not None
    assert (view.decision.behavior, view.decision.answer) == ("answer", "blue")
