"""The agents' side of `agentcomms doctor`: agentcomms in each agent's own configuration (its
hooks, its never-list, hooks switched off), and the permission mode Claude Code starts in,
where it decides whether approvals reach agentcomms at all."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import defaultdict
from pathlib import Path

from agentcomms.cli.checks import Check
from agentcomms.config import Config, host_name
from agentcomms.errors import AgentcommsError
from agentcomms.models import Agent


async def check_agents(checks: list[Check], cfg: Config | None) -> None:
    """agentcomms in each agent's own configuration (`agentcomms install`), where installed;
    with the configuration, whether its hooks refuse the never-list it lists."""
    import os
    from pathlib import Path

    from agentcomms.agents.install import Target, hook_url
    from agentcomms.agents.installed import inspect_all
    from agentcomms.config.home import agentcomms_home

    codex_home = os.environ.get("CODEX_HOME")
    port = cfg.server.hook_port if cfg is not None else None
    target = Target(
        "claude-code",
        codex_home=Path(codex_home) if codex_home else None,
        agentcomms_home=agentcomms_home().absolute(),  # the never-list's rules for its folder
        # Where the gateway takes posted reports: hooks posting elsewhere go unheard.
        hook_url=hook_url(port, "claude-code") if port else None,
    )
    never_for = cfg.never_rules if cfg is not None else None
    for f in await asyncio.to_thread(inspect_all, target, never_for):
        where = f.name.rpartition(" ")[0]
        checks.append(Check(f"agent {f.name}", f.ok, f"{where}: {f.detail}", f.fix, f.warn))


async def check_permission_modes(agents: list[Agent], checks: list[Check]) -> None:
    """The permission mode Claude Code starts in, for each registered pane on this host that
    runs it (in the pane's directory) and for this directory, where agentcomms' hooks are
    installed: the modes that keep approvals in the terminal are named."""
    from agentcomms.agents.permission_mode import FIX, effective_mode, has_our_hooks

    home, here = Path.home(), Path.cwd()
    projects = {here: "this directory"}
    for agent, project in await claude_panes(agents):
        projects.setdefault(project, f"agent {agent}")
    for project, who in projects.items():
        try:
            if who == "this directory" and not has_our_hooks(home, project):
                continue  # Claude Code is not used here
            found = effective_mode(home, project)
        except AgentcommsError as exc:
            checks.append(Check(f"permission mode {who}", False, str(exc), "fix the file"))
            continue
        ok = found.known is not None
        warn = ok and not found.asks_agentcomms
        fix = None if found.asks_agentcomms else FIX
        if fix and found.source is not None and found.source.parent.parent == project:
            fix = f'set permissions.defaultMode to "default" in {found.source}'  # it wins
        checks.append(Check(f"permission mode {who}", ok, f"{who}: {found.describe()}", fix, warn))


async def claude_panes(agents: list[Agent]) -> list[tuple[str, Path]]:
    """(agent id, Claude Code's directory) for each registered pane on this host that runs
    Claude Code: a process named ``claude`` under the pane's (found in /proc, as a shell that
    started it may still be the pane's foreground program), and the directory it runs in."""
    from agentcomms.bridge import BridgeError, TmuxAdapter

    here = host_name()
    tmux = TmuxAdapter()
    found: list[tuple[str, Path]] = []
    for agent in agents:
        if not agent.target or agent.host != here or agent.type != "tmux":
            continue
        look = ["display-message", "-p", "-t", agent.target, "#{pane_pid}"]
        try:
            out = await tmux.run_commands(agent.tmux_socket, [look])
        except BridgeError:
            continue  # the panes' check names it
        if out.strip().isdigit() and (cwd := claude_under(int(out.strip()))) is not None:
            found.append((agent.id, cwd))
    return found


def claude_under(root: int) -> Path | None:
    """The directory of a process named ``claude`` that descends from `root`, if any."""
    children: dict[int, list[int]] = defaultdict(list)
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat_line = (entry / "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        name, _, rest = stat_line.partition("(")[2].rpartition(")")
        pid, fields = int(entry.name), rest.split()
        names[pid] = name
        children[int(fields[1])].append(pid)
    todo = [root]
    while todo:
        pid = todo.pop()
        if names.get(pid) == "claude":
            with contextlib.suppress(OSError):
                return Path(os.readlink(f"/proc/{pid}/cwd"))
        todo.extend(children.get(pid, []))
    return None
