"""What the commands that only talk to the gateway do: list agents, send, interrupt, read events,
reply, list channels, read the inbox.

The typer commands (:mod:`agentcomms.cli.agents_cmd`) declare their arguments and help; the quick
path (:mod:`agentcomms.cli.quick`) parses the same arguments without typer. Both call these, so
the two answer alike. Standard library only at import, like :mod:`agentcomms.cli.output`.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

from agentcomms.cli.output import (
    ask,
    fail,
    gateway,
    message_or_stdin,
    print_json,
    print_json_line,
    run_async,
    shown,
    stdout,
    styled,
)
from agentcomms.limits import INTERRUPT_LIFETIME_S

SEND_EXAMPLE = "echo text | agentcomms send AGENT"
REPLY_EXAMPLE = "echo text | agentcomms reply cli:local -a AGENT"


def agents(show_all: bool, as_json: bool) -> None:
    result = ask("agents", include_offline=show_all)
    if as_json:
        print_json(result)
        return
    if not result["agents"]:
        hint = "" if show_all else " (try --all)"
        stdout().print(f"no agents{hint}; register one with `agentcomms agents register`")
        return
    from rich.table import Table

    table = Table("agent", "type", "target", "status", "state", "pending", "last error")
    for a in result["agents"]:
        table.add_row(
            a["id"],
            a["type"],
            shown(a["target"] or "-"),
            a["status"]
            + (f" since {a['unreachable_since']}" if a.get("unreachable_since") else ""),
            shown(_state(a)),
            "?" if a["pending"] is None else str(a["pending"]),
            shown(a.get("last_error") or ""),
        )
    stdout().print(table)


def _state(agent: dict[str, Any]) -> str:
    """`busy since 19:07:18`, `waiting (permission for Bash: ls)`, `unknown (no hooks)`."""
    state = str(agent.get("state") or "unknown")
    if state == "unknown":
        return "unknown (no hooks)"
    if agent.get("waiting_for"):
        state += f" ({agent['waiting_for']})"
    if since := agent.get("state_since"):
        state += f" since {str(since)[11:19]}"
    confirmed = agent.get("confirmed_at")
    if confirmed and confirmed != since:  # read off its pane, no hook having said so lately
        state += f", seen {str(confirmed)[11:19]}"
    return state


def send(
    agent: str,
    message: str | None,
    *,
    wait: bool,
    timeout: float,
    event_id: str | None,
    as_json: bool,
) -> None:
    params: dict[str, Any] = {
        "agent_id": agent,
        "message": message_or_stdin(message, SEND_EXAMPLE),
        "wait": wait,
        "timeout": timeout,
    }
    if event_id:
        params["event_id"] = event_id
    _print_post(ask("send", **params), as_json, "message", agent)


def interrupt(agent: str, reason: str | None, *, wait: bool, timeout: float, as_json: bool) -> None:
    params: dict[str, Any] = {"agent_id": agent, "wait": wait, "timeout": timeout}
    if reason:
        params["reason"] = reason
    _print_post(ask("interrupt", **params), as_json, "interrupt", agent)


def _print_post(result: dict[str, Any], as_json: bool, what: str, agent: str) -> None:
    if as_json:
        print_json(result)
        return
    state = result.get("status", "queued")
    stdout().print(f"{what} {result['event_id']}: {state}")
    if note := result.get("note"):
        stdout().print(f"  note: {note}", soft_wrap=True)
    if state == "failed":
        fail(f"{what} failed: {result.get('error')}")
    if state == "rejected":  # e.g. a worker whose deployment key is not the gateway's
        fail(f"{what} was rejected and not typed (the note says why)")
    if state == "queued" and (why := _why_it_waits(agent, what)):
        stdout().print(f"  note: {why}", soft_wrap=True)


def _why_it_waits(agent_id: str, what: str) -> str | None:
    """Why a queued message will not be typed soon, so a typo in the agent id shows at once."""
    agents = ask("agents", include_offline=True)["agents"]
    agent = next((a for a in agents if a["id"] == agent_id), None)
    # An interrupt does not wait for long: pressed later, it would stop whatever comes next.
    waits = (
        f"the interrupt is pressed only if that changes within {INTERRUPT_LIFETIME_S} s, "
        "never later"
        if what == "interrupt"
        else "the message waits"
    )
    if agent is None or agent["status"] == "offline":
        register = f"`agentcomms agents register {agent_id} --tmux SESSION:WINDOW.PANE`"
        if what == "interrupt":
            return f"no pane is registered for {agent_id!r}; {waits} ({register})"
        return f"no pane is registered for {agent_id!r}; the message waits until {register}"
    if agent["status"] == "broken":
        return f"the mailbox of {agent_id!r} is broken: {agent['last_error']}"
    if agent["status"] == "unreachable":
        return f"the pane of {agent_id!r} is unreachable ({agent['last_error']}); {waits}"
    return None


def reply(channel: str, message: str | None, agent: str | None, as_json: bool) -> None:
    text = message_or_stdin(message, REPLY_EXAMPLE)
    params: dict[str, Any] = {"channel_id": channel, "message": text}
    if agent:
        params["agent_id"] = agent
    result = ask("reply", **params)
    if as_json:
        print_json(result)
    else:
        stdout().print(f"sent {result['event_id']}")


def channels(as_json: bool) -> None:
    result = ask("channels")
    if as_json:
        print_json(result)
        return
    from rich.table import Table

    table = Table("channel", "provider", "agent", "status")
    for c in result["channels"]:
        status = c.get("status", "")
        if c.get("error"):
            status += f" ({shown(c['error'])})"
        table.add_row(c["channel_id"], c["provider"], c["agent_id"] or "-", status)
    stdout().print(table)


def events(agent: str, limit: int, since: str | None, follow: bool, as_json: bool) -> None:
    run_async(_events, gateway(), agent, limit, since, follow, as_json)


async def _events(
    socket: Path, agent: str, limit: int, since: str | None, follow: bool, as_json: bool
) -> None:
    from agentcomms.client import GatewayClient

    async with GatewayClient(socket) as gw:
        # Without --since, start from the latest `limit` events, as a person expects.
        tail = since is None
        while True:
            params: dict[str, Any] = {"agent_id": agent, "limit": limit, "tail": tail}
            if since:
                params["since"] = since
            tail = False
            batch = (await gw.call("events", **params))["events"]
            if as_json and not follow:  # one document, as the gateway answered it
                print_json({"events": batch})
                return
            for e in batch:
                _print_event(e, as_json)
            if batch:
                since = batch[-1]["id"]
            if not follow:
                return
            if len(batch) < limit:
                await asyncio.sleep(0.5)


def _print_event(e: dict[str, Any], as_json: bool) -> None:
    if as_json:  # following: one event per line
        print_json_line(e)
        return
    text = e["payload"].get("text") or e["payload"].get("reason") or ""
    when = e["created_at"][11:19]
    stdout().print(
        styled(
            f"{when} {e['id']} ",
            (e["type"], "bold"),
            f" {shown(e['channel_id'])} {e['status']}: {shown(text)}",
            *([(f" ({e['note']})", "yellow")] if e.get("note") else []),
        )
    )


def inbox(limit: int, follow: bool, as_json: bool) -> None:
    run_async(_inbox, gateway(), limit, follow, as_json)


async def _inbox(socket: Path, limit: int, follow: bool, as_json: bool) -> None:
    from agentcomms.client import GatewayClient

    async with GatewayClient(socket) as gw:
        if not follow:
            messages = (await gw.call("inbox", limit=limit))["messages"]
            if as_json:
                print_json({"messages": messages})
                return
            if not messages:
                stdout().print("inbox is empty")
            for m in messages:
                _print_inbox_message(m, as_json=False)
            return
        # Following: the newest `limit` first, then whatever comes after the last one shown.
        params: dict[str, Any] = {"limit": limit}
        shown_approvals: set[str] = set()
        for turn in itertools.count():
            batch = (await gw.call("inbox", **params))["messages"]
            for m in batch:
                _print_inbox_message(m, as_json)
            if batch:
                params = {"limit": 1000, "since": batch[-1]["id"]}
            elif "since" not in params:
                params = {"limit": 1000}  # empty so far: everything that arrives is new
            if turn % APPROVALS_EVERY == 0:  # asking Temporal costs more than the inbox
                for a in (await gw.call("approvals"))["approvals"]:
                    if a["id"] not in shown_approvals:
                        shown_approvals.add(a["id"])
                        _print_approval(a, as_json)
            await asyncio.sleep(0.5)


# `inbox -f` looks for new permission requests every this many turns (of 0.5 s).
APPROVALS_EVERY = 4


def _print_approval(a: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json_line({"approval": a})
        return
    ask, approval_id = a.get("ask", "permission"), a["id"]
    if ask == "question":
        options = " / ".join(f"{n}. {o}" for n, o in enumerate(a.get("options") or [], 1))
        asked = f" asks: {shown(a.get('question') or '')} ({shown(options)})"
        how = f"  (agentcomms answer {approval_id} LABEL)"
    elif ask == "plan":
        asked = f" asks to carry out its plan: {shown(a['input'])}"
        how = f"  (agentcomms approve {approval_id} / deny {approval_id} -m WHY)"
    else:
        asked = f" asks to use {shown(a['tool'])}: {shown(a['input'])}"
        how = f"  (agentcomms approve {approval_id} / deny {approval_id})"
    stdout().print(
        styled(f"{a['opened_at'][:19]} ", (shown(a["agent_id"]), "bold"), asked, (how, "yellow"))
    )


def _print_inbox_message(m: dict[str, Any], as_json: bool) -> None:
    if as_json:  # following: one message per line, as `events --follow --json` prints events
        print_json_line(m)
        return
    who = m.get("source_agent_id") or m["agent_id"]
    stdout().print(
        styled(
            f"{m['created_at'][:19]} ",
            (shown(who), "bold"),
            f": {shown(m['payload'].get('text', ''))}",
        )
    )
