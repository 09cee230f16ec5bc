"""A reporting hook for the agents that can only run commands (Codex, Gemini CLI): the shell the
agent starts for it posts the hook's JSON to the gateway's loopback door itself.

Claude Code posts a hook's JSON with no process at all (an ``"http"`` hook). Codex and Gemini CLI
run every hook as a command, through a shell they start anyway (Codex ``$SHELL -lc``, Gemini CLI
``bash -c``): this command turns that shell into bash, reads the JSON with builtins, writes one
HTTP request over bash's ``/dev/tcp`` and reads the answer's first line, so no Python starts
around a tool call. The token is read from its owner-only file, never put on a command line
(which every local user can read in ``/proc``). With the gateway down the connection is refused
at once and the hook exits 0, silent: the agent behaves as if agentcomms were not installed.
Only reports go this way; a hook that decides (a permission request, the never-list) stays
``agentcomms hook``, which fails closed.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentcomms.agents.install import Target

# The name the script runs under ($0): how an install recognises its own hook.
POSTER = "agentcomms-post-hook"

# $1 the agent kind, $2 the door's URL, $3 the token's file, $4 the agentcomms agent (optional).
# The hook's clock first (bash 5's $EPOCHREALTIME in µs, its locale's decimal mark dropped; sent
# in ns): Codex runs reports in the background, so they may arrive out of order, and the state
# orders them by when each hook started (bash before 5 sends none: the arrival counts). stderr
# goes: Gemini CLI shows a hook's stderr as a message when its stdout is empty. The byte count
# needs the C locale. The answer's status line is waited for (2 s at most), so a hook the agent
# waits for has been stamped before the agent runs its next one.
SCRIPT = r"""at=${EPOCHREALTIME//[!0-9]/}
exec 2>/dev/null
LC_ALL=C
IFS= read -r token < "$3"
[ -n "$token" ] || exit 0
IFS= read -r -d '' body
url=${2#http://}
host=${url%%/*}
exec 3<>"/dev/tcp/${host%:*}/${host##*:}" || exit 0
printf 'POST /%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-Agentcomms-Token: %s\r\nX-Agentcomms-Pane: %s\r\nX-Agentcomms-Tmux: %s\r\nX-Agentcomms-Agent: %s\r\nX-Agentcomms-At: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' "${url#*/}" "$host" "$token" "$TMUX_PANE" "$TMUX" "${4:-$AGENTCOMMS_AGENT_ID}" "${at:+${at}000}" "${#body}" "$body" >&3
IFS= read -r -t 2 answer <&3
exit 0"""


def post_command(kind: str, url: str, token_file: str, agent_id: str | None = None) -> str:
    """The hook's shell line: bash in place of the shell that runs it (``exec``: no process more)."""
    args = [kind, url, token_file, *([agent_id] if agent_id else [])]
    return shlex.join(["exec", "bash", "-c", SCRIPT, POSTER, *args])


def post_hook(target: Target, **extra: Any) -> dict[str, Any]:
    """Codex's or Gemini CLI's reporting hook for `target`, posted by the shell they start."""
    assert target.hook_url is not None and target.hook_token_file is not None
    url, token_file = target.hook_url, str(target.hook_token_file)
    return {
        "type": "command",
        "command": post_command(target.kind, url, token_file, target.agent_id),
        **extra,
    }


def posted_to(command: object, kind: str) -> str | None:
    """The door's URL when `command` is agentcomms' posting hook for `kind`, whatever its
    script's version; None for any other command."""
    if not isinstance(command, str):
        return None
    try:
        tokens = shlex.split(command)
    except ValueError:
        return None
    if tokens[:3] != ["exec", "bash", "-c"] or tokens[4:6] != [POSTER, kind] or len(tokens) < 8:
        return None
    return tokens[6]


def agent_of(command: str) -> str | None:
    """The agentcomms agent a posting hook names, if any."""
    tokens = shlex.split(command)
    return tokens[8] if len(tokens) > 8 else None
