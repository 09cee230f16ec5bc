"""`agentcomms phone --dial`: the local phone calls the deployment, as the human would call its
Twilio number: the pending permission requests one by one, the agents' last replies, a message
for an agent. Each prompt is shown, and the next line typed answers it (a key, a word, or the
message); the end of the input hangs up, and so does Ctrl-C: either way the gateway is told, so
the call ends there too instead of staying in progress.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, TextIO

from agentcomms.client import GatewayClient
from agentcomms.framing import strip_unsafe
from agentcomms.voice.callsystem.local import StdinLines

HINTS = {"key": "key> ", "pin": "pin> ", "message": "message> "}


async def dial(
    socket: Path, lines: StdinLines, *, interactive: bool, out: TextIO = sys.stdout
) -> None:
    """One call to the deployment, until it says goodbye or the input ends."""

    def show(text: str) -> None:
        out.write(strip_unsafe(text) + "\n")
        out.flush()

    gateway = GatewayClient(socket)
    await gateway.connect()
    call = None
    try:
        prompt: dict[str, Any] = await gateway.call("phone_dial")
        call = prompt["call"]
        while True:
            show(prompt["words"])
            if prompt["expect"] == "end":
                return
            if interactive:
                out.write(HINTS.get(prompt["expect"], "> "))
                out.flush()
            text = await lines.next()
            if text is None:
                break
            prompt = await gateway.call(
                "phone_dial_answer",
                call=call,
                step=prompt["step"],
                query=prompt["query"],
                text=text,
            )
        await gateway.call("phone_dial_hang_up", call=call)
        show("hung up")
    except asyncio.CancelledError:  # Ctrl-C: the call is hung up all the same
        if call is not None:
            await gateway.call("phone_dial_hang_up", call=call)
        out.write("\n")  # past the terminal's ^C
        show("hung up")
        raise
    finally:
        await gateway.close()
