"""The known ACP agents by kind: which npm package runs each over ACP, pinned, and its command.

Gemini CLI speaks ACP itself (``gemini --acp``); Claude Code and Codex speak it through Zed's
adapters, which run the agent below them. A kind's command is found on ``PATH`` or in the
agents' npm prefix (``~/.cache/agentcomms-agents``, where the tests install them too), and is
installed there with npm when it is missing. An agent on another host is registered with its
program's bare name (:func:`portable`), which that host's worker finds there (:func:`located`):
never a path of the machine that started it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

AGENTS_PREFIX = Path.home() / ".cache" / "agentcomms-agents"


@dataclass(frozen=True)
class Kind:
    package: str  # name@version, pinned: an adapter's protocol moves with its releases
    program: str  # the executable the package installs
    args: tuple[str, ...] = ()


KINDS: dict[str, Kind] = {
    "gemini": Kind("@google/gemini-cli@0.61.0", "gemini", ("--acp",)),
    "claude-code": Kind("@zed-industries/claude-agent-acp@0.23.1", "claude-agent-acp"),
    "codex": Kind("@zed-industries/codex-acp@0.16.0", "codex-acp"),
}


class KindUnavailable(Exception):
    """A kind's command is not installed and cannot be (no npm, or npm failed)."""


def find(kind: str, *, prefix: Path = AGENTS_PREFIX) -> list[str] | None:
    """The command that runs `kind` over ACP, if installed; None if not."""
    known = _known(kind)
    installed = prefix / "node_modules" / ".bin" / known.program
    if installed.exists():
        return [str(installed), *known.args]
    on_path = shutil.which(known.program)
    return [on_path, *known.args] if on_path else None


def portable(kind: str) -> list[str]:
    """The command that runs `kind` as any host finds it: its program's name, found by the
    worker of the host that runs it (:func:`located`)."""
    known = _known(kind)
    return [known.program, *known.args]


def located(command: Sequence[str], *, prefix: Path = AGENTS_PREFIX) -> list[str]:
    """`command` as this host runs it: a known kind's bare program name that PATH does not
    have is the one installed in the agents' npm prefix; anything else is run as given."""
    program = command[0] if command else ""
    programs = {known.program for known in KINDS.values()}
    if "/" in program or program not in programs or shutil.which(program):
        return list(command)
    installed = prefix / "node_modules" / ".bin" / program
    return [str(installed), *command[1:]] if installed.exists() else list(command)


def install(kind: str, *, prefix: Path = AGENTS_PREFIX) -> list[str]:
    """Install `kind`'s pinned package into `prefix` with npm; its command."""
    known = _known(kind)
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise KindUnavailable(
            f"{kind} runs on Node.js, and node or npm is not on PATH: install Node.js 20 or "
            f"later (e.g. `apt-get install nodejs npm`), then `npm install --prefix {prefix} "
            f"{known.package}`; or pass the command yourself with --acp -- COMMAND"
        )
    prefix.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", known.package],
        capture_output=True,
        text=True,
        check=False,
    )
    command = find(kind, prefix=prefix)
    if done.returncode != 0 or command is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise KindUnavailable(
            f"`npm install {known.package}` failed ({'; '.join(tail) or done.returncode}): "
            f"install it into {prefix} yourself, or pass the command with --acp -- COMMAND"
        )
    return command


def _known(kind: str) -> Kind:
    known = KINDS.get(kind)
    if known is None:
        raise KindUnavailable(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
    return known
