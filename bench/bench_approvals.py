"""How long an approval takes each way, beside the bare hook measured in the same run.

    .venv/bin/python -m bench.bench_approvals [--runs 20]

The stack (Temporal dev server, worker, gateway) runs in this process, as `agentcomms up` runs
it; the hook is a real `agentcomms hook claude-code` process given a `PermissionRequest`, as
Claude Code runs it. Measured per run:

- the bare hook: a `PreToolUse` report, start to exit (what every hook costs);
- hook start → the approval listed by `agentcomms approvals` (the gateway opened it, Temporal's
  visibility shows it);
- the human's answer (`approval_decide` on the socket) → the hook's decision on its stdout.

Then the same through Telegram, its Bot API served by the tests' fake on a local port and driven
by the real SDK (the fake answers at once, so what is measured is agentcomms' part):

- hook start → the request with its buttons at the Bot API (`sendMessage` with a keyboard);
- Alice's press (a `callback_query` update) → the hook's decision on its stdout;
- the agent's `Stop` hook (a turn a Telegram message started) → its reply at the Bot API.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from agentcomms.client import GatewayClient
from agentcomms.store import Store
from bench.common import latency_page, machine, summarize, temporal, write_results
from tests.fakes.telegram import FakeTelegram
from tests.support.chat import CHAT, with_telegram
from tests.support.waiting import eventually

AGENTCOMMS = str(Path(sys.executable).parent / "agentcomms")
AGENT = "bench-agent"
# How often a waiting bench looks again: small beside what it measures.
POLL_S = 0.002
PERMISSION = {
    "session_id": "bench",
    "hook_event_name": "PermissionRequest",
    "tool_name": "Bash",
    "tool_input": {"command": "touch bench.txt"},
    "permission_suggestions": [],
}


async def _hook(payload: dict[str, Any]) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        AGENTCOMMS, "hook", "claude-code",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "AGENTCOMMS_AGENT_ID": AGENT},
    )  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(payload).encode())
    proc.stdin.close()
    return proc


async def _listed(gw: GatewayClient, seen: set[str]) -> str:
    while True:
        for a in (await gw.call("approvals"))["approvals"]:
            if a["id"] not in seen:
                return str(a["id"])
        await asyncio.sleep(0.005)


async def _through_telegram(runs: int, root: Path) -> dict[str, list[float]]:
    """The approval each way and the mirrored reply, through the fake Telegram."""
    times: dict[str, list[float]] = {"buttons": [], "pressed": [], "mirrored": []}
    telegram = FakeTelegram()
    telegram.known_chats.add(CHAT)
    home = root / "t"
    configure = with_telegram(telegram, AGENT)
    async with telegram.server, temporal(home, configure=configure) as rt:
        for run_no in range(runs):
            started = time.perf_counter()
            proc = await _hook(PERMISSION)
            shown = len(telegram.sent)
            message = await eventually(partial(_buttons, telegram, shown), interval=POLL_S)
            times["buttons"].append((time.perf_counter() - started) * 1000)
            data = message["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
            assert proc.stdout is not None
            started = time.perf_counter()
            telegram.human_presses(message, data, user_id=CHAT)
            line = await proc.stdout.readline()
            times["pressed"].append((time.perf_counter() - started) * 1000)
            assert b'"allow"' in line, line
            await proc.wait()

            # A turn Alice's message started, and its end.
            asked = f"question {run_no}"
            telegram.human_says(CHAT, asked)
            await eventually(partial(_kept, rt.store, asked), interval=POLL_S)
            prompt = f"[telegram:{CHAT} from Alice] {asked}"
            await (await _hook(_turn("UserPromptSubmit", prompt=prompt))).wait()
            reply = f"answer {run_no}"
            started = time.perf_counter()
            stop = await _hook(_turn("Stop", last_assistant_message=reply))
            await eventually(partial(_told, telegram, reply), interval=POLL_S)
            times["mirrored"].append((time.perf_counter() - started) * 1000)
            await stop.wait()
    return times


def _buttons(telegram: FakeTelegram, shown: int) -> dict[str, Any] | None:
    """The first message with a keyboard the bot sent after the first `shown`."""
    return next((m for m in telegram.sent[shown:] if "reply_markup" in m), None)


def _told(telegram: FakeTelegram, text: str) -> bool:
    return text in telegram.texts_to(CHAT)


async def _kept(store: Store, text: str) -> bool:
    """Whether Alice's message is in the projection (the turn's reply answers it)."""
    history = await store.channel_history(f"telegram:{CHAT}", 10, agent_id=AGENT)
    return any(e.payload.get("text") == text for e in history)


def _turn(event: str, **fields: str) -> dict[str, Any]:
    return {"session_id": "bench", "hook_event_name": event, **fields}


async def run(runs: int) -> dict[str, Any]:
    bare: list[float] = []
    opened: list[float] = []
    answered: list[float] = []
    with tempfile.TemporaryDirectory(prefix="acb-") as tmp:
        home = Path(tmp) / "h"
        async with temporal(home):
            os.environ["AGENTCOMMS_HOME"] = str(home)
            os.environ.pop("TMUX", None)
            seen: set[str] = set()
            async with GatewayClient(home / "daemon.sock") as gw:
                for _ in range(runs):
                    started = time.perf_counter()
                    proc = await _hook({**PERMISSION, "hook_event_name": "PreToolUse"})
                    await proc.wait()
                    bare.append((time.perf_counter() - started) * 1000)

                    started = time.perf_counter()
                    proc = await _hook(PERMISSION)
                    approval = await _listed(gw, seen)
                    opened.append((time.perf_counter() - started) * 1000)
                    seen.add(approval)

                    assert proc.stdout is not None
                    started = time.perf_counter()
                    await gw.call("approval_decide", id=approval, behavior="allow", by="bench")
                    line = await proc.stdout.readline()
                    answered.append((time.perf_counter() - started) * 1000)
                    assert b'"allow"' in line, line
                    await proc.wait()
        telegram = await _through_telegram(runs, Path(tmp))
    return {
        "machine": machine(),
        "runs": runs,
        "results": {
            "bare hook (PreToolUse report), start to exit": summarize(bare),
            "PermissionRequest hook start → approval listed": summarize(opened),
            "answer → the hook's decision printed": summarize(answered),
            "PermissionRequest hook start → buttons at Telegram": summarize(telegram["buttons"]),
            "press in Telegram → the hook's decision printed": summarize(telegram["pressed"]),
            "Stop hook start → the reply at Telegram": summarize(telegram["mirrored"]),
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(run(args.runs))
    page = latency_page(
        "Approvals",
        results,
        f"{args.runs} runs of each, one after another; the hook a real process.",
        "what",
    )
    print(page)
    if not args.no_save:
        write_results("approvals", results, page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
