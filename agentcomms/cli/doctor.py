"""The checks behind `agentcomms doctor`: each says what it found, and for a problem what to do.

It looks from outside, as a user would: the config file, Temporal, the projection, the gateway's
socket, each host's worker (asked through a query to one of its mailboxes, which only a polling
worker can answer), and agentcomms' hooks in each agent's own configuration. It changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import stat
from collections import defaultdict
from datetime import timedelta
from typing import Any

from agentcomms.cli.checks import Check
from agentcomms.cli.doctor_agents import check_agents, check_permission_modes
from agentcomms.cli.output import named
from agentcomms.config import Config, default_config_path, host_name, load_config
from agentcomms.errors import AgentcommsError
from agentcomms.models import Agent

# How long a mailbox may take to answer a query before its host counts as having no worker.
PROBE_TIMEOUT = timedelta(seconds=3)


async def run_checks() -> list[Check]:
    checks: list[Check] = []
    cfg = _check_config(checks)
    if cfg is None:
        await check_agents(checks, None)
        await check_permission_modes([], checks)
        return checks
    client = await _check_temporal(cfg, checks)
    agents = await _check_projection(cfg, checks)
    if client is not None:
        await _check_workers(cfg, client, agents, checks)
    await _check_panes(agents, checks)
    _check_states(agents, checks)
    if client is not None:
        await _check_mailboxes(client, agents, checks)
    await _check_gateway(cfg, checks)
    _check_email(cfg, checks)
    _check_service(checks)
    await check_agents(checks, cfg)
    await check_permission_modes(agents, checks)
    return checks


# ---- the config ------------------------------------------------------------------------------


def _check_config(checks: list[Check]) -> Config | None:
    path = default_config_path()
    try:
        cfg = load_config()
    except AgentcommsError as exc:  # modes, JSON, unset variables, bad keys: all named
        checks.append(
            Check(
                "config",
                False,
                f"config {path}: {exc}",
                "fix it, then `agentcomms config validate`",
            )
        )
        return None
    if not path.exists():
        checks.append(Check("config", True, f"no config file at {path}: defaults apply"))
    else:
        mode = stat.S_IMODE(path.stat().st_mode)
        home = stat.S_IMODE(path.parent.stat().st_mode)
        checks.append(
            Check("config", True, f"config {path} is valid (file {mode:04o}, directory {home:04o})")
        )
    return cfg


# ---- Temporal --------------------------------------------------------------------------------


async def _check_temporal(cfg: Config, checks: list[Check]) -> Any:
    from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.service import RPCError

    from agentcomms.address import server_answers
    from agentcomms.search_attributes import ALL as SEARCH_ATTRIBUTES
    from agentcomms.temporal import connect
    from agentcomms.temporal_admin import search_attribute_commands

    t = cfg.temporal
    if not await asyncio.to_thread(server_answers, t.address):
        checks.append(
            Check(
                "temporal",
                False,
                f"no Temporal server answers at {t.address}",
                "start everything with `agentcomms up`, or set temporal.address to a running "
                "server",
            )
        )
        return None
    try:
        client = await connect(t)
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=t.namespace)
        )
    except AgentcommsError as exc:
        checks.append(
            Check(
                "temporal",
                False,
                str(exc),
                "check temporal.address and the TLS keys (temporal.tls, api_key, tls_server_ca, "
                "tls_client_cert, tls_client_key, tls_server_name)",
            )
        )
        return None
    except RPCError as exc:
        checks.append(
            Check(
                "temporal",
                False,
                f"Temporal at {t.address} has no namespace {t.namespace!r} ({exc.message})",
                f"create it (`temporal operator namespace create {t.namespace}`) or set "
                "temporal.namespace",
            )
        )
        return None
    checks.append(
        Check("temporal", True, f"Temporal answers at {t.address}, namespace {t.namespace}")
    )
    unknown: str | None = None
    try:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=t.namespace)
        )
        missing = [k.name for k in SEARCH_ATTRIBUTES if k.name not in listed.custom_attributes]
    except RPCError as exc:  # Temporal Cloud answers this only to admins
        missing, unknown = [], exc.message
    if missing:
        checks.append(
            Check(
                "search attributes",
                False,
                f"namespace {t.namespace} lacks the search attributes {', '.join(missing)}",
                "`agentcomms up` or `agentcomms worker` adds them on start where the server "
                "allows it; else, as a namespace admin: "
                + "; ".join(f"`{command}`" for command in search_attribute_commands(t, missing)),
            )
        )
    else:
        detail = f"search attributes {', '.join(k.name for k in SEARCH_ATTRIBUTES)} exist"
        checks.append(
            Check(
                "search attributes", True, detail + (f" (not listed: {unknown})" if unknown else "")
            )
        )
    return client


# ---- the projection ---------------------------------------------------------------------------


async def _check_projection(cfg: Config, checks: list[Check]) -> list[Agent]:
    """The schema's revision, and the registered agents the other checks look at."""
    from agentcomms.store import Store, schema_status

    url = cfg.database.resolved_url()
    try:
        status = await schema_status(url)
    except AgentcommsError as exc:
        checks.append(Check("projection", False, str(exc), "check database.url in the config"))
        return []
    if not status.up_to_date:
        checks.append(
            Check(
                "projection",
                False,
                f"the projection {status.url} is at revision {status.current or 'none'}, this "
                f"agentcomms expects {status.head}",
                "`agentcomms db upgrade` (every process also upgrades it when it starts)",
            )
        )
        return []
    checks.append(
        Check("projection", True, f"the projection {status.url} is current ({status.current})")
    )
    store = await Store.open(url, migrate=False)
    try:
        return await store.list_agents(include_offline=False)
    finally:
        await store.close()


# ---- workers ----------------------------------------------------------------------------------


async def _check_workers(
    cfg: Config, client: Any, agents: list[Agent], checks: list[Check]
) -> None:
    from agentcomms.temporal import last_polls, poll_silence_s
    from agentcomms.workflow_ids import host_task_queue

    by_host: dict[str, list[Agent]] = defaultdict(list)
    for agent in agents:
        if agent.host:
            by_host[agent.host].append(agent)
    answers = await asyncio.gather(*(_answers(client, a[0].id) for a in by_host.values()))
    for (host, hosted), answered in zip(by_host.items(), answers, strict=True):
        queue = host_task_queue(host)
        names = named([a.id for a in hosted])
        if answered:
            checks.append(
                Check(f"worker {host}", True, f"host {host}: a worker polls {queue} ({names})")
            )
            continue
        polls = await last_polls(client, queue)
        seen = f"last poll {min(polls.values()):.0f} s ago" if polls else "no worker ever polled"
        checks.append(
            Check(
                f"worker {host}",
                False,
                f"host {host} has no worker for its agents {names}: nothing answered on {queue} "
                f"within {PROBE_TIMEOUT.total_seconds():.0f} s ({seen})",
                f"start `agentcomms worker` (or `agentcomms up`) on {host}; their messages wait",
            )
        )
    shared = cfg.temporal.task_queue
    polls = await last_polls(client, shared)
    live = [who for who, age in polls.items() if age <= poll_silence_s(cfg.temporal)]
    if live:
        checks.append(
            Check("shared queue", True, f"the shared queue {shared} has a worker ({live[0]})")
        )
    else:
        checks.append(
            Check(
                "shared queue",
                False,
                f"no worker polls the shared queue {shared}: chat replies are not sent",
                "start `agentcomms worker` (or `agentcomms up`) on any host",
            )
        )


async def _answers(client: Any, agent_id: str) -> bool:
    """True when the agent's mailbox answers a query: a worker polls its queue right now."""
    from temporalio.service import RPCError

    from workflows.mailbox.client import mailbox_handle
    from workflows.mailbox.workflow import AgentWorkflow

    handle = mailbox_handle(client, agent_id)
    try:
        async with asyncio.timeout(PROBE_TIMEOUT.total_seconds() + 1):
            await handle.query(AgentWorkflow.state, rpc_timeout=PROBE_TIMEOUT)
    except (RPCError, TimeoutError):
        return False
    return True


# ---- panes and mailboxes ------------------------------------------------------------------------


async def _check_panes(agents: list[Agent], checks: list[Check]) -> None:
    """A pane on this host is looked at in tmux; one elsewhere, as its mailbox last found it."""
    from agentcomms.bridge import BridgeError, TmuxAdapter
    from agentcomms.models import PaneTarget

    here = host_name()
    problems: list[Check] = []
    for agent in agents:
        if not agent.target or agent.type != "tmux":
            continue  # a process agent has no pane to look at
        where = f"pane {agent.target} on host {agent.host}"
        fix = (
            f"create the pane, or `agentcomms agents register {agent.id} --tmux "
            "SESSION:WINDOW.PANE`; its messages wait meanwhile"
        )
        if agent.status == "unreachable":
            problems.append(
                Check(f"pane {agent.id}", False, f"agent {agent.id}: {where} is missing "
                      f"({agent.last_error})", fix)
            )  # fmt: skip
        elif agent.host == here:
            try:
                await TmuxAdapter().pane_info(
                    PaneTarget(target=agent.target, socket=agent.tmux_socket)
                )
            except BridgeError as exc:
                problems.append(
                    Check(f"pane {agent.id}", False, f"agent {agent.id}: {where}: {exc}", fix)
                )
    checks.extend(problems)
    if not problems:
        count = sum(1 for a in agents if a.target)
        checks.append(Check("panes", True, f"all {count} registered panes are there"))


def _check_states(agents: list[Agent], checks: list[Check]) -> None:
    """Which agents' hooks report their state. Not a failure: a pane without an agent of a kind
    with hooks (a shell) is typed into on its look alone."""
    silent = [a.id for a in agents if a.target and a.state == "unknown"]
    known = [f"{a.id} {a.state}" for a in agents if a.target and a.state != "unknown"]
    detail = f"agents' states from their hooks: {named(known) or 'none'}"
    if silent:
        detail += (
            f"; no hook has reported for {named(silent)} (hooks missing?): their messages "
            "are typed on the pane's look alone"
        )
    fix = "`agentcomms install claude-code` (or codex, gemini), then restart the agent"
    checks.append(Check("agent states", True, detail, fix if silent else None))


async def _check_mailboxes(client: Any, agents: list[Agent], checks: list[Check]) -> None:
    from temporalio.service import RPCError

    from workflows.mailbox.client import broken_mailboxes

    try:
        broken = await broken_mailboxes(client)
    except RPCError as exc:
        checks.append(Check("mailboxes", False, f"could not list mailboxes: {exc.message}"))
        return
    # The namespace may hold other deployments' mailboxes: only this projection's agents count.
    ours = {a.id for a in agents}
    found = {agent: why for agent, why in broken.items() if agent in ours}
    for agent, why in sorted(found.items()):
        checks.append(
            Check(
                f"mailbox {agent}",
                False,
                f"agent {agent}'s mailbox is broken: {why}",
                "its messages are kept; see the workflow's history in the Temporal UI",
            )
        )
    if not found:
        checks.append(
            Check("mailboxes", True, f"no mailbox reports a problem ({len(ours)} agents)")
        )


# ---- the gateway and chat providers -------------------------------------------------------------


async def _check_gateway(cfg: Config, checks: list[Check]) -> None:
    from agentcomms.client import call

    socket = cfg.server.socket()
    try:
        status = await asyncio.wait_for(call(socket, "status"), timeout=5)
    except (AgentcommsError, TimeoutError, OSError) as exc:
        checks.append(
            Check(
                "gateway",
                False,
                f"the gateway does not answer on {socket} ({exc or 'timed out'})",
                "start it: `agentcomms up` (or `agentcomms gateway`)",
            )
        )
        return
    checks.append(Check("gateway", True, f"the gateway answers on {socket}"))
    enabled = [p for p in status.get("providers", []) if p["status"] != "disabled"]
    for p in enabled:
        # Connected but saying something (a scope the token lacks) is a warning to act on.
        ok = p["status"] == "connected" and not p.get("error")
        checks.append(
            Check(
                f"provider {p['name']}",
                ok,
                f"{p['name']} is {p['status']}" + (f": {p['error']}" if p.get("error") else ""),
                None if ok else f"check chat.{p['name']} in the config and its credentials",
            )
        )
    if _webhooks_used(cfg):
        host, port = cfg.server.http_host, cfg.server.http_port
        answered = False
        with contextlib.suppress(OSError, TimeoutError):
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout=3)
            writer.close()
            answered = True
        checks.append(
            Check(
                "http",
                answered,
                f"the webhook listener {'answers' if answered else 'does not answer'} on "
                f"{host}:{port}",
                None if answered else "is another program on that port? see the gateway's log",
            )
        )


def _check_email(cfg: Config, checks: list[Check]) -> None:
    """What the configuration says before any mail moves (the connection itself is the
    gateway's provider line above: connected, or reconnecting with its last error)."""
    if not cfg.chat.email.enabled:
        return
    for problem, fix in cfg.chat.email.problems():
        checks.append(Check("email", False, problem, fix, warn=True))


def _check_service(checks: list[Check]) -> None:
    """Whether `up` runs as the user's service; not installed is a choice, not a problem."""
    from agentcomms.user_service import status

    found = status()
    broken = found.installed and found.running is False
    worth_knowing = found.fix is not None and not broken
    checks.append(Check("service", not broken, found.detail, found.fix, worth_knowing))


def _webhooks_used(cfg: Config) -> bool:
    chat = cfg.chat
    return (
        (chat.telegram.enabled and chat.telegram.mode == "webhook")
        or (chat.slack.enabled and chat.slack.mode == "http")
        or chat.sms.enabled
        or chat.whatsapp.enabled
        # A push notification's buttons post to the listener through the published URL.
        or (chat.ntfy.enabled and cfg.server.public_url is not None)
    )
