"""`agentcomms status`: the gateway, Temporal (and its UI), workers, agents, in one report.

Standard library only at import. It reads two keys of the config (the gateway's socket and
Temporal's address), asks the gateway, and loads Temporal's SDK only when the gateway is down and
someone must still say who polls the task queues.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentcomms.cli.output import NAMES_SHOWN, fail, named, print_fields, print_json, run_async
from agentcomms.errors import AgentcommsError


def show(as_json: bool) -> None:
    """Print the report; exit 1 when the gateway is down."""
    from agentcomms.config.reading import gateway_socket, temporal_address
    from agentcomms.console_token import with_token

    try:
        socket, address = gateway_socket(), temporal_address()
    except AgentcommsError as exc:
        fail(str(exc))
    report = run_async(_status, socket, address)
    gw = report["gateway"]
    if as_json:
        print_json(report)
    else:
        temporal = report["temporal"]
        answering = "answering" if temporal["answering"] else "not answering"
        print_fields(
            [
                (
                    "Gateway",
                    f"running since {gw['started_at']}" if gw["running"] else "not running",
                ),
                ("Socket", report["socket"]),
                ("Temporal", f"{temporal['address']} ({answering})"),
                ("Temporal UI", report.get("temporal_ui")),
                ("Console", gw.get("console") and with_token(gw["console"])),
                ("Workers", _describe_workers(report["workers"])),
                (
                    "Agents",
                    f"{gw['agents_online']} online of {gw['agents']}" if gw["running"] else None,
                ),
                ("Agent states", describe_states(gw.get("agent_states", {}))),
                *(
                    (f"Broken: {agent}", reason)
                    for agent, reason in gw.get("agents_broken", {}).items()
                ),
                *(
                    (
                        f"Host down: {down['host']}",
                        f"no worker since {down['since']}; unreachable: "
                        f"{named(down['agents'])}; {down['pending']} messages wait",
                    )
                    for down in gw.get("hosts_down", [])
                ),
                ("Database", gw.get("database")),
                ("Service", _describe_service(report["service"])),
                ("Chat", _describe_providers(gw.get("providers"))),
            ]
        )
    if not gw["running"]:
        raise SystemExit(1)


def describe_states(states: dict[str, str]) -> str | None:
    """Each agent's state (``backend busy, docs ready``); of many agents, how many are in each
    state, the rarest first (a waiting agent is news, a thousand unknown ones are not), and a
    few of their names."""
    if len(states) <= NAMES_SHOWN:
        return ", ".join(f"{agent} {state}" for agent, state in states.items()) or None
    by_state: dict[str, list[str]] = {}
    for agent, state in states.items():
        by_state.setdefault(state, []).append(agent)
    groups = sorted(by_state.items(), key=lambda group: (len(group[1]), group[0]))
    return "; ".join(f"{len(agents):,} {state}: {named(agents)}" for state, agents in groups)


def _describe_providers(providers: list[dict[str, str]] | None) -> str | None:
    """Enabled providers and their connection, e.g. "telegram reconnecting (…)"."""
    if providers is None:
        return None
    enabled = [p for p in providers if p["status"] != "disabled"]
    return (
        "; ".join(
            f"{p['name']} {p['status']}" + (f" ({p['error']})" if p.get("error") else "")
            for p in enabled
        )
        or "none enabled"
    )


def _describe_service(service: dict[str, Any]) -> str:
    fix = service.get("fix")
    return str(service["detail"]) + (f" ({fix})" if fix else "")


def _describe_workers(workers: dict[str, list[str]] | None) -> str | None:
    if workers is None:
        return None
    return "; ".join(
        f"{len(ids)} polling {queue}" if ids else f"none polling {queue}"
        for queue, ids in workers.items()
    )


async def _workers() -> dict[str, list[str]] | None:
    """Who polls this host's queue and the shared one; None when Temporal cannot be asked.

    Only when the gateway cannot say: this loads Temporal's SDK and the `temporal` section's
    schema (its TLS files, its API key), which nothing else here needs.
    """
    from temporalio.service import RPCError

    from agentcomms.config import host_name, load_sections
    from agentcomms.temporal import connect, pollers
    from agentcomms.workflow_ids import host_task_queue

    try:
        cfg = load_sections(["temporal"])
        client = await connect(cfg.temporal)
        queues = [host_task_queue(host_name()), cfg.temporal.task_queue]
        return {queue: await pollers(client, queue) for queue in queues}
    except (AgentcommsError, RPCError):  # unreachable, or a TLS file unreadable: not known
        return None


async def _status(socket: Path, address: str) -> dict[str, Any]:
    from agentcomms.address import server_answers
    from agentcomms.client import call
    from agentcomms.errors import GatewayUnavailable
    from agentcomms.state_file import read_state
    from agentcomms.user_service import status as service_status

    try:
        gw: dict[str, Any] = await asyncio.wait_for(call(socket, "status"), timeout=5)
    except (GatewayUnavailable, TimeoutError):
        gw = {"running": False}
    state = read_state() or {}
    answering = server_answers(address)
    return {
        "gateway": gw,
        "socket": str(socket),
        "temporal": {
            "address": address,
            "answering": answering,
            "embedded": state.get("temporal_embedded", False),
        },
        "temporal_ui": state.get("temporal_ui"),
        "up_pid": state.get("pid"),
        "service": service_status().as_json(),
        # The gateway says who polls (it holds a Temporal client); asking Temporal from here
        # loads its SDK, so only when the gateway cannot say.
        "workers": gw.get("workers") or (await _workers() if answering else None),
    }
