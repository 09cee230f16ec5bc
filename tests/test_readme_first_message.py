"""The README's "A first message", run as a newcomer runs it: each line of its block, read from the
README itself (so the two cannot drift apart), in a fresh home, with `agentcomms` on PATH as the
README says to put it there, against `agentcomms up`."""

from __future__ import annotations

import getpass
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.serve import free_port
from tests.support.cli import start_up, stop, wait_for_line

README = Path(__file__).resolve().parent.parent / "README.md"


def _first_message_block() -> list[str]:
    """The lines of the sh block under "## A first message", as written (comments included)."""
    text = README.read_text()
    section = text.split("## A first message", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None, "README's 'A first message' has no ```sh block"
    return block[1].splitlines()


def _commands_and_notes(lines: list[str]) -> list[tuple[str, list[str]]]:
    """Each command with the comment lines that follow it (what the README says it shows)."""
    steps: list[tuple[str, list[str]]] = []
    for line in lines:
        command, _, note = line.partition("#")
        if command.strip():
            steps.append((command.strip(), [note.strip()] if note.strip() else []))
        elif note.strip() and steps:
            steps[-1][1].append(note.strip())
    return steps


def test_the_readme_block_is_parsed_into_its_commands() -> None:
    steps = _commands_and_notes(_first_message_block())
    assert [c.split()[0] for c, _ in steps][:3] == ["tmux", "agentcomms", "agentcomms"]
    assert any(c.startswith("tmux capture-pane") for c, _ in steps)


@pytest.mark.timeout(150)
def test_a_first_message_works_line_by_line_as_the_readme_writes_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    tmux_dir = tmp_path / "tmux"
    tmux_dir.mkdir(mode=0o700)
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTCOMMS_", "TMUX"))}
    env.update(
        HOME=str(home),
        # The README's `source .venv/bin/activate`, for commands run one by one.
        PATH=f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
        # A tmux server of the test's own, as the newcomer's default one.
        TMUX_TMPDIR=str(tmux_dir),
        # Ports of the test's own, so runs side by side never meet; a newcomer has the defaults.
        AGENTCOMMS_TEMPORAL__ADDRESS=f"127.0.0.1:{free_port()}",
        AGENTCOMMS_TEMPORAL__UI_PORT=str(free_port()),
        AGENTCOMMS_CONSOLE__PORT="0",
        COLUMNS="200",
    )
    up = start_up(env)
    try:
        wait_for_line(up, "Database", timeout=60)
        shown: dict[str, str] = {}
        for command, notes in _commands_and_notes(_first_message_block()):
            done = subprocess.run(
                ["bash", "-c", command], env=env, capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 0, f"{command!r} failed: {done.stdout}{done.stderr}"
            shown[command] = done.stdout
            if command.startswith("tmux capture-pane"):
                # The README's next comment line is what the pane shows, for its reader's login.
                typed = notes[1].replace("alice", getpass.getuser())
                assert typed in done.stdout, (typed, done.stdout)
        events = next(out for c, out in shown.items() if c.startswith("agentcomms events"))
        assert "delivered" in events, events
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=60) == 0
    finally:
        stop(up)
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True, check=False)
