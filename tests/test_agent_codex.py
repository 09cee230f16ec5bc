"""The real Codex in a tmux pane against the scripted Responses model, and `agentcomms install
codex` as Codex reads it: its server listed, its hooks held for the user's trust, then run in the
agent's pane for each event, and `notify` at the end of a turn; under a never-list, a crashed
agentcomms stops Codex's calls rather than let them run unchecked."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentcomms.agents.install import CODEX_EVENTS, Target
from agentcomms.agents.install_agents import plan
from agentcomms.agents.installed import Finding, inspect_all
from tests.fakes.openai_responses import FakeResponses, shell, text
from tests.support.agents import CODEX_HOOKS_REVIEW, PROMPT_HINT, agent_binary, start_codex
from tests.support.hooks import failing_agentcomms, recorded_runs, recording_agentcomms
from tests.support.tmux import Tmux
from tests.support.waiting import eventually


def _doctor(home: Path, project: Path) -> dict[str, Finding]:
    """What doctor finds of the install, by name."""
    return {f.name: f for f in inspect_all(Target("codex", home=home, project=project))}


async def test_codex_starts_at_its_prompt_and_a_prompt_reaches_the_model(
    tmux: Tmux, tmp_path: Path, responses: FakeResponses
) -> None:
    responses.on("name a prime number", text("Seven is prime."))
    codex = await start_codex(tmux, tmp_path, responses)

    await codex.type("name a prime number")

    assert await responses.wait_for_human("prime") == "name a prime number"
    await codex.wait_for_screen("Seven is prime.")
    assert responses.human_texts == ["name a prime number"]  # its title request is no turn


async def test_installed_hooks_wait_for_trust_then_run_in_the_agents_pane(
    tmux: Tmux, tmp_path: Path, responses: FakeResponses
) -> None:
    exe, runs = recording_agentcomms(tmp_path)

    def install(home: Path, project: Path) -> None:
        target = Target("codex", agent_id="api", home=home, project=project, argv=(str(exe),))
        plan(target).apply()

    responses.on("report your hooks", text("Hooks reported."))
    codex = await start_codex(tmux, tmp_path, responses, setup=install, until=CODEX_HOOKS_REVIEW)
    assert f"{len(CODEX_EVENTS)} hooks are new or changed" in codex.screen()
    pane_id = tmux.run("display-message", "-p", "-t", codex.target, "#{pane_id}").stdout.strip()

    assert "codex (user) trust" in _doctor(codex.home, codex.project)
    await codex.answer(CODEX_HOOKS_REVIEW, "2", "Enter")  # "Trust all and continue"
    await codex.wait_for_screen(PROMPT_HINT)
    found = _doctor(codex.home, codex.project)
    assert found["codex (user) hooks"].ok and "codex (user) trust" not in found  # Codex kept it
    await codex.type("report your hooks")
    await codex.wait_for_screen("Hooks reported.")

    def ran() -> list[dict[str, Any]] | None:
        found = [r for r in recorded_runs(runs) if r["args"] == "hook codex"]
        names = {e["hook_event_name"] for e in found}
        return found if {"SessionStart", "UserPromptSubmit", "Stop"} <= names else None

    seen = await eventually(ran)
    assert all(e["agent_id"] == "api" and e["pane"] == pane_id for e in seen)
    by_name = {e["hook_event_name"]: e for e in seen}
    assert by_name["UserPromptSubmit"]["prompt"] == "report your hooks"
    assert by_name["Stop"]["last_assistant_message"] == "Hooks reported."

    def notified() -> list[dict[str, Any]]:
        heads = [p.read_text().split("\n", 1)[0] for p in runs.iterdir()]
        return [json.loads(h[len("hook codex ") :]) for h in heads if h.startswith("hook codex {")]

    # Codex notifies the end of its own title-writing turn too (another thread-id): measured.
    turns = await eventually(
        lambda: [t for t in notified() if t["input-messages"] == ["report your hooks"]]
    )
    assert [(t["type"], t["last-assistant-message"]) for t in turns] == [
        ("agent-turn-complete", "Hooks reported.")
    ]


async def test_a_crashed_agentcomms_under_a_never_list_stops_codexs_calls(
    tmux: Tmux, tmp_path: Path, responses: FakeResponses
) -> None:
    """Codex runs a call whose PreToolUse hook exited 1 (a Python error) as if the hook had
    said nothing: with a never-list that hook fails closed, so a crashed agentcomms refuses
    every call, and the model reads why."""
    (_, crashing), _ = failing_agentcomms(tmp_path / "agentcomms")

    def install(home: Path, project: Path) -> None:
        never = ("Bash(rm -rf *)",)
        plan(
            Target("codex", home=home, project=project, argv=(str(crashing),), never=never)
        ).apply()

    responses.on("make the file", shell("touch made.txt"), text("Tried to make it."))
    codex = await start_codex(tmux, tmp_path, responses, setup=install, until=CODEX_HOOKS_REVIEW)
    await codex.answer(CODEX_HOOKS_REVIEW, "2", "Enter")  # "Trust all and continue"
    await codex.wait_for_screen(PROMPT_HINT)

    await codex.type("make the file")
    await codex.wait_for_screen("Tried to make it.")

    (result,) = responses.tool_results
    print(f"the model read: {result.content!r}")
    assert "agentcomms could not check this call against its never-list" in result.content
    assert not (codex.project / "made.txt").exists()


@pytest.mark.usefixtures("agent_clis")
async def test_codex_lists_the_installed_mcp_server(tmp_path: Path) -> None:
    plan(Target("codex", agent_id="api", home=tmp_path, argv=("/opt/ac/bin/agentcomms",))).apply()
    codex = await agent_binary("codex")

    listed = await asyncio.to_thread(
        subprocess.run,
        [str(codex), "mcp", "get", "agentcomms"],
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert "command: /opt/ac/bin/agentcomms" in listed.stdout, listed.stdout + listed.stderr
    assert "args: mcp" in listed.stdout
    assert "env: AGENTCOMMS_AGENT_ID=*****" in listed.stdout
