"""The wrapper that makes a blocking hook refuse the call when agentcomms cannot answer.

Every agent takes a blocking hook's exit 1 (a Python error) or 127 (agentcomms gone) as a
warning and runs the call, and each kills a hook that outlives the ``timeout`` in its settings
and runs the call then too (Claude Code blocks only on a hook's exit 2, Codex and Gemini CLI
the same). Exit 2 blocks it, with the reason on stderr for the model to read: so the wrapped
command gives up by itself a little before the agent would kill it (coreutils ``timeout``, which
also ends whatever agentcomms started), and exits 2 whenever agentcomms failed or hung.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

# What runs a command for a limited time: coreutils' name, or Homebrew's without its gnubin.
TIMEOUT_PROGRAMS = ("timeout", "gtimeout")
# How long before the agent's own timeout agentcomms is stopped (TERM, then KILL a second
# later): the shell still has to write the reason before the agent kills it.
GIVE_UP_EARLY_S = 3
# What `timeout` exits with when it stopped the command: by its TERM, or by the KILL after it.
_TIMED_OUT = "124|137"
# What `fail_closed` adds to a command, whatever its reason; the older wrapper had no `timeout`.
_FAILS_CLOSED = re.compile(
    r" \|\| \{ case \$\? in 124\|137\) echo .+ ;; \*\) echo .+ ;; esac >&2; exit 2; \}$", re.DOTALL
)
_FAILS_CLOSED_UNTIMED = re.compile(r" \|\| \{ echo .+ >&2; exit 2; \}$", re.DOTALL)


def timeout_program() -> str | None:
    """This machine's `timeout`, by its full path (an agent may run hooks with a short PATH);
    None where there is none (macOS without coreutils)."""
    return next(filter(None, map(shutil.which, TIMEOUT_PROGRAMS)), None)


def fail_closed(command: str, reason: str, agent_timeout_s: int) -> str:
    """`command` made to refuse the call when it fails, or has not answered a little before the
    agent's `agent_timeout_s` (then the reason says so). Without a `timeout` program it only
    refuses when it fails: a hang is left to the agent."""
    failed = f"echo {shlex.quote(reason)} >&2; exit 2;"
    runner = timeout_program()
    if runner is None:
        return f"{command} || {{ {failed} }}"
    within = max(agent_timeout_s - GIVE_UP_EARLY_S, 1)
    hung = shlex.quote(f"{reason} (no answer within {within} s)")
    # `env` runs the command's own ``VAR=value`` prefix, which `timeout` cannot.
    limited = f"{shlex.quote(runner)} -k 1 {within} env {command}"
    return (
        f"{limited} || {{ case $? in {_TIMED_OUT}) echo {hung} ;; *) echo {shlex.quote(reason)} ;;"
        " esac >&2; exit 2; }"
    )


def fails_closed(command: str) -> bool:
    """Whether `command` refuses the call when it fails or hangs (`fail_closed`); an older
    agentcomms wrote the never-list's hooks without it, or without the time limit (which is
    enough only where this machine has no `timeout` to give it one)."""
    tokens = shlex.split(command)
    if tokens and Path(tokens[0]).name in TIMEOUT_PROGRAMS:
        return _FAILS_CLOSED.search(command) is not None
    return timeout_program() is None and _FAILS_CLOSED_UNTIMED.search(command) is not None


def after_timeout(tokens: list[str]) -> list[str]:
    """`tokens` without the ``timeout -k 1 N`` that `fail_closed` puts before a command."""
    if not tokens or Path(tokens[0]).name not in TIMEOUT_PROGRAMS:
        return tokens
    rest = tokens[1:]
    while rest and rest[0].startswith("-"):
        rest = rest[2:] if rest[0] in ("-k", "-s") else rest[1:]
    return rest[1:]
