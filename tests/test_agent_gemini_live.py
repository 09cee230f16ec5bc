"""The real Gemini CLI in a pane, `agentcomms install gemini` in its home with remote approvals
on, its model scripted: its hooks move the agent's state (a message typed when it is ready makes
it busy for the turn, ready after), its turn's reply (``AfterAgent``'s ``prompt_response``) goes
back to the Telegram chat that started the turn, and its shell commands are asked through
agentcomms (a policy rule skips Gemini's own dialog, its ``BeforeTool`` hook waits): one
approved from the terminal runs, one denied does not and the model reads why, and one on the
never-list is refused without asking anyone.

One Gemini, on its own tmux server, serves the module; its hooks find the agent by their pane. Its
reporting hooks post to the gateway's hook door from the shell Gemini starts for them, as
`install` writes them with the door on; the asking and never-list hook is a command."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agentcomms.agents.install import Target, hook_url
from agentcomms.agents.install_agents import plan
from agentcomms.agents.state import GEMINI_CANCELLED_EVENT, STALE_AFTER
from agentcomms.config import Config
from agentcomms.hook_token import hook_token, token_path
from tests.fakes.gemini import FakeGemini, shell, text
from tests.fakes.telegram import FakeTelegram
from tests.support.agents import GEMINI_DIALOG, GeminiPane, start_gemini
from tests.support.chat import CHAT, connected, running_telegram, with_telegram
from tests.support.cli import AGENTCOMMS, cli, cli_home
from tests.support.home import module_home
from tests.support.stack import Stack, register, running_stack
from tests.support.tmux import SENT_HEADER, Tmux
from tests.support.waiting import eventually

# Every test here starts a real agent.
pytestmark = pytest.mark.usefixtures("agent_clis")

# In Claude Code's words: Gemini's run_shell_command is Bash to the never-list.
NEVER = "Bash(rm -rf *)"


@dataclass
class Setup:
    stack: Stack
    gemini: GeminiPane
    agent_id: str
    home: Path  # the CLI's
    telegram: FakeTelegram

    async def row(self) -> dict[str, Any] | None:
        listed = await self.stack.call("agents")
        return next((a for a in listed["agents"] if a["id"] == self.agent_id), None)

    async def state_is(self, state: str) -> dict[str, Any] | None:
        row = await self.row()
        return row if row is not None and row["state"] == state else None

    async def approval(self) -> dict[str, Any] | None:
        done = await cli(self.home, "approvals", "--json")
        assert done.returncode == 0, done.stderr
        rows = json.loads(done.stdout)["approvals"]
        return next((r for r in rows if r["agent_id"] == self.agent_id), None)


@pytest.fixture(scope="module")
async def setup(
    temporal_env: WorkflowEnvironment,
    tmux_socket_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Setup]:
    root = tmp_path_factory.mktemp("gemini-live")
    with module_home(root):
        async for setup in _setup(temporal_env, tmux_socket_dir, root):
            yield setup


async def _setup(
    temporal_env: WorkflowEnvironment, tmux_socket_dir: Path, root: Path
) -> AsyncIterator[Setup]:
    server = Tmux(tmux_socket_dir / f"g-{uuid.uuid4().hex[:8]}")
    model = FakeGemini()
    agent_id = f"gemini-live-{uuid.uuid4().hex[:6]}"

    def with_door(cfg: Config) -> Config:
        cfg = with_telegram(telegram, agent_id)(cfg)
        return cfg.model_copy(update={"server": cfg.server.model_copy(update={"hook_port": 0})})

    async with (
        model.server,
        running_telegram(CHAT) as telegram,
        running_stack(temporal_env.client, root / "stack", configure=with_door) as stack,
    ):
        door = stack.gateway.hook_reports
        assert door is not None

        def install(home: Path, project: Path) -> None:
            hook_token()  # made at first use, as `install` makes it
            target = Target(
                "gemini",
                home=home,
                project=project,
                argv=(AGENTCOMMS,),
                remote_approvals=True,
                never=(NEVER,),
                hook_url=hook_url(door.server.port, "gemini"),
                hook_token_file=token_path(),
            )
            plan(target).apply()

        try:
            await connected(stack, "telegram")
            gemini = await start_gemini(
                server,
                root / "gemini",
                model,
                setup=install,
                env={"AGENTCOMMS_SOCKET": str(stack.cfg.server.socket())},
            )
            await register(stack, agent_id, server, gemini.target, submit_delay_ms=300)
            setup = Setup(stack, gemini, agent_id, cli_home(root, stack), telegram)
            # Gemini queues prompts while its MCP servers start ("Initializing... Prompts will
            # be queued."), and its BeforeAgent waits with them: one turn first, so that the
            # tests see a Gemini that takes a prompt as it is typed.
            model.on("warm up", text("Warm."))
            await gemini.type("warm up")
            await gemini.wait_for_screen("Warm.", timeout=60)
            await eventually(lambda: setup.state_is("ready"), timeout=30)
            yield setup
        finally:
            server.run("kill-server", check=False)


async def test_a_message_sent_when_ready_is_submitted_busy_for_the_turn_and_ready_after(
    setup: Setup,
) -> None:
    model, release = setup.gemini.model, asyncio.Event()
    model.on("count the stars", text("Too many to count.", hold=release))
    await eventually(lambda: setup.state_is("ready"), timeout=30)

    try:
        sent = await setup.stack.call(
            "send", agent_id=setup.agent_id, message="count the stars", wait=True, timeout=60
        )

        # Gemini's BeforeAgent carried the typed prompt: the message was submitted, not only
        # typed.
        assert (sent["status"], sent["delivered"]) == ("submitted", True)
        assert await model.wait_for_human("count the stars") == f"{SENT_HEADER}count the stars"
        await eventually(lambda: setup.state_is("busy"), timeout=30)
    finally:
        release.set()
    await setup.gemini.wait_for_screen("Too many to count.")
    await eventually(lambda: setup.state_is("ready"), timeout=30)


async def test_a_prompt_typed_at_the_terminal_is_busy_until_its_turn_ends(setup: Setup) -> None:
    """Nothing of agentcomms typed it: only Gemini's own hooks can say busy, then ready."""
    model, release = setup.gemini.model, asyncio.Event()
    model.on("weigh the moon", text("Heavy.", hold=release))
    await eventually(lambda: setup.state_is("ready"), timeout=30)

    try:
        await setup.gemini.type("weigh the moon")

        await model.wait_for_human("weigh the moon")
        await eventually(lambda: setup.state_is("busy"), timeout=30)
    finally:
        release.set()
    await setup.gemini.wait_for_screen("Heavy.")
    await eventually(lambda: setup.state_is("ready"), timeout=30)


async def test_the_turns_reply_answers_the_telegram_message_that_started_it(setup: Setup) -> None:
    telegram = setup.telegram
    await eventually(lambda: setup.state_is("ready"), timeout=30)
    setup.gemini.model.on("two plus two", text("It is 4."))
    asked = telegram.human_says(CHAT, "what is two plus two?")

    replies = await eventually(
        lambda: [m for m in telegram.sent if m["text"] == "It is 4."] or None, timeout=60
    )
    assert [r["reply_to_message_id"] for r in replies] == [asked["message"]["message_id"]]
    assert replies[0]["chat"]["id"] == CHAT


async def test_a_command_approved_from_the_terminal_runs(setup: Setup) -> None:
    gemini, model = setup.gemini, setup.gemini.model
    await gemini.wait_ready()
    model.on("make the approved file", shell("touch approved.txt"), text("Approved made."))
    await gemini.type("make the approved file")

    approval = await eventually(setup.approval, timeout=30)
    print(f"listed: {approval}")
    waiting = await eventually(lambda: setup.state_is("waiting"), timeout=30)
    assert "touch approved.txt" in waiting["waiting_for"]
    assert GEMINI_DIALOG not in gemini.screen()  # Gemini's own dialog was skipped
    done = await cli(setup.home, "approve", approval["id"])
    assert done.returncode == 0, done.stderr

    await gemini.wait_for_screen("Approved made.")
    assert (gemini.project / "approved.txt").exists()


async def test_a_command_denied_from_the_terminal_does_not_run_and_the_model_reads_why(
    setup: Setup,
) -> None:
    gemini, model = setup.gemini, setup.gemini.model
    await gemini.wait_ready()
    model.on("make the denied file", shell("touch denied.txt"), text("Understood."))
    seen = len(model.tool_results)
    await gemini.type("make the denied file")

    approval = await eventually(setup.approval, timeout=30)
    done = await cli(setup.home, "deny", approval["id"], "-m", "not in this folder")
    assert done.returncode == 0, done.stderr

    result = await eventually(lambda: model.result_after(seen), timeout=30)
    print(f"the model read: {result.content!r}")
    assert "not in this folder" in result.content
    await gemini.wait_for_screen("Understood.")
    assert not (gemini.project / "denied.txt").exists()


async def test_a_never_listed_command_is_refused_without_asking_and_the_model_reads_why(
    setup: Setup,
) -> None:
    """The asking hook refuses it at once: no approval, no dialog, the command never runs."""
    gemini, model = setup.gemini, setup.gemini.model
    await gemini.wait_ready()
    (gemini.project / "keep").mkdir()
    model.on("clear the keep folder", shell("rm -rf keep"), text("Could not clear."))
    seen = len(model.tool_results)
    await gemini.type("clear the keep folder")

    result = await eventually(lambda: model.result_after(seen), timeout=30)
    print(f"the model read: {result.content!r}")
    assert f"never-list has {NEVER}" in result.content
    await gemini.wait_for_screen("Could not clear.")
    assert (gemini.project / "keep").is_dir()
    assert await setup.approval() is None  # no one was asked


async def _lone_gemini(tmux: Tmux, root: Path, argv: tuple[str, ...]) -> GeminiPane:
    """A Gemini with remote approvals installed, run by `argv`, and no agentcomms listening."""
    model = FakeGemini()
    await model.server.start()

    def install(home: Path, project: Path) -> None:
        target = Target("gemini", home=home, project=project, argv=argv, remote_approvals=True)
        plan(target).apply()

    env = {"AGENTCOMMS_SOCKET": str(root / "nobody.sock")}
    return await start_gemini(tmux, root / "gemini", model, setup=install, env=env)


async def test_agentcomms_unreachable_gives_the_call_back_to_geminis_own_dialog(
    tmux: Tmux, tmp_path: Path
) -> None:
    """Nothing is allowed by default: the hook answers "ask", and Gemini's own dialog asks."""
    gemini = await _lone_gemini(tmux, tmp_path, (AGENTCOMMS,))
    try:
        gemini.model.on("make the lonely file", shell("touch lonely.txt"), text("Lonely made."))
        await gemini.type("make the lonely file")

        await gemini.wait_for_screen(GEMINI_DIALOG)
        assert not (gemini.project / "lonely.txt").exists()
        await gemini.answer(GEMINI_DIALOG, "Enter")  # its "Allow once"
        await gemini.wait_for_screen("Lonely made.")
        assert (gemini.project / "lonely.txt").exists()
    finally:
        await gemini.model.server.stop()


async def test_an_asking_hook_that_fails_blocks_the_call_and_says_why(
    tmux: Tmux, tmp_path: Path
) -> None:
    """Gemini takes a hook's exit 1 as a mere warning and goes on: with its own dialog skipped,
    that would run the call unasked, so the asking hook's failure blocks it (measured: a hook
    that exits with another code, such as 127 for a missing program, blocks whatever it
    guards, a whole turn for BeforeAgent)."""
    crashing = tmp_path / "bin" / "agentcomms"
    crashing.parent.mkdir()
    crashing.write_text(
        '#!/bin/sh\ncase "$*" in *--remote-approvals*) echo "Traceback: boom" >&2; exit 1;; esac\n'
    )
    crashing.chmod(0o755)
    gemini = await _lone_gemini(tmux, tmp_path, (str(crashing),))
    try:
        model = gemini.model
        model.on("make the orphan file", shell("touch orphan.txt"), text("Could not."))
        await gemini.type("make the orphan file")

        await gemini.wait_for_screen("Could not.")
        (result,) = model.tool_results
        print(f"the model read: {result.content!r}")
        assert "agentcomms could not ask the human for this tool call" in result.content
        assert not (gemini.project / "orphan.txt").exists()
    finally:
        await gemini.model.server.stop()


async def test_geminis_own_dialog_is_waiting_and_a_message_waits_until_it_is_answered(
    setup: Setup, tmp_path: Path
) -> None:
    """Without remote approvals Gemini asks in its own dialog: its Notification says waiting,
    and a message sent meanwhile is not typed into the dialog, even once the state is old
    enough for the pane to decide (the pane shows the dialog); it is typed after."""
    model = FakeGemini()
    agent_id = f"gemini-own-{uuid.uuid4().hex[:6]}"
    async with model.server:

        def install(home: Path, project: Path) -> None:
            plan(Target("gemini", home=home, project=project, argv=(AGENTCOMMS,))).apply()

        server = setup.gemini.tmux  # the module's tmux server: the fixture ends it
        env = {"AGENTCOMMS_SOCKET": str(setup.stack.cfg.server.socket())}
        gemini = await start_gemini(server, tmp_path, model, name="own", setup=install, env=env)
        await register(setup.stack, agent_id, server, gemini.target, submit_delay_ms=300)
        model.on("make the plain file", shell("touch plain.txt"), text("Plain made."))
        await gemini.type("make the plain file")
        await gemini.wait_for_screen(GEMINI_DIALOG, timeout=60)

        async def waiting() -> dict[str, Any] | None:
            listed = await setup.stack.call("agents")
            row = next((a for a in listed["agents"] if a["id"] == agent_id), None)
            return row if row is not None and row["state"] == "waiting" else None

        await eventually(waiting, timeout=30)
        await setup.stack.call("send", agent_id=agent_id, message="are you there")
        await asyncio.sleep(STALE_AFTER.total_seconds() + 3)
        assert GEMINI_DIALOG in gemini.screen()
        assert not any("are you there" in t for t in model.human_texts)
        assert not (gemini.project / "plain.txt").exists()

        await gemini.answer(GEMINI_DIALOG, "Enter")  # its "Allow once"
        await gemini.wait_for_screen("Plain made.")
        assert (gemini.project / "plain.txt").exists()
        assert await model.wait_for_human("are you there") == f"{SENT_HEADER}are you there"


async def test_a_message_waits_while_the_asking_hook_waits_and_is_typed_after(
    setup: Setup,
) -> None:
    """While the hook waits Gemini still shows its input box (and "Executing Hook… esc to
    cancel"): the message waits all the same, also past the time after which the pane decides,
    and goes as a prompt of its own once the call was answered."""
    gemini, model = setup.gemini, setup.gemini.model
    await gemini.wait_ready()
    model.on("make the patient file", shell("touch patient.txt"), text("Patient made."))
    await gemini.type("make the patient file")
    approval = await eventually(setup.approval, timeout=30)

    sent = await setup.stack.call("send", agent_id=setup.agent_id, message="when you can, rest")
    await asyncio.sleep(STALE_AFTER.total_seconds() + 3)
    event = await setup.stack.store.get_event(sent["event_id"])
    assert event is not None and event.status != "delivered"

    done = await cli(setup.home, "approve", approval["id"])
    assert done.returncode == 0, done.stderr
    await gemini.wait_for_screen("Patient made.")
    assert await model.wait_for_human("rest") == f"{SENT_HEADER}when you can, rest"


async def test_a_call_cancelled_by_esc_closes_its_approval_and_a_late_allow_is_refused(
    setup: Setup,
) -> None:
    """Gemini neither signals nor ends the waiting hook on Esc, and sends no hook event: the
    hook reads Gemini's "Request cancelled." in the session's transcript and closes the
    approval, so the chat's buttons go and an allow afterwards allows nothing. Esc put Gemini
    back at its prompt, and the hook says so: the agent is ready by the hook's report, with no
    message waiting that would have the pane read."""
    gemini, model, telegram = setup.gemini, setup.gemini.model, setup.telegram
    await gemini.wait_ready()
    model.on("make the abandoned file", shell("touch abandoned.txt"), text("Abandoned made."))
    seen = len(model.tool_results)
    await gemini.type("make the abandoned file")
    approval = await eventually(setup.approval, timeout=30)
    posted = await eventually(lambda: telegram.request_for(approval["id"]), timeout=30)

    pressed = asyncio.get_running_loop().time()
    await gemini.keys("Escape")

    waited = await setup.stack.call("approval_wait", id=approval["id"], wait_s=30)
    print(f"closed {asyncio.get_running_loop().time() - pressed:.1f} s after Esc")
    assert waited["status"] == "decided", waited
    assert waited["behavior"] == "terminal"
    assert waited["message"] == "canceled in the terminal"
    assert await setup.approval() is None
    await eventually(lambda: setup.state_is("ready"), timeout=30)
    print(f"ready {asyncio.get_running_loop().time() - pressed:.1f} s after Esc")
    snapshot = await setup.stack.gateway.mailbox.snapshot(setup.agent_id)
    assert snapshot is not None
    assert snapshot.readiness.event == GEMINI_CANCELLED_EVENT
    edited = await eventually(
        lambda: [e for e in telegram.edits if e["message_id"] == posted["message_id"]] or None,
        timeout=30,
    )
    assert f"{approval['id']}: canceled in the terminal" in edited[-1]["text"]
    late = await cli(setup.home, "approve", approval["id"])
    assert late.returncode == 0, late.stderr
    assert "was answered already: canceled in the terminal" in late.stdout
    await gemini.wait_ready()
    assert not (gemini.project / "abandoned.txt").exists()
    assert len(model.tool_results) == seen  # the model was never given the call's result
    # Measured: the pane shows "Request cancelled." over Gemini's empty input box (its status
    # line still names the hooks a moment), and a message sent now is Gemini's next prompt.
    model.on("after the cancel", text("Back at it."))
    await setup.stack.call("send", agent_id=setup.agent_id, message="after the cancel, go on")
    typed = await model.wait_for_human("after the cancel")
    assert typed == f"{SENT_HEADER}after the cancel, go on"
    await gemini.wait_for_screen("Back at it.")
