"""`agentcomms phone --dial`: the local phone calls the deployment, as the human would call its
Twilio number: the pending permission requests one by one, the agents' last replies, a message
for an agent. Each prompt is shown, and the next line typed answers it (a key, a word, or the
message); the end of the input hangs up.
"""

from __future__ import annotations

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
    try:
        prompt: dict[str, Any] = await gateway.call("phone_dial")
        while True:
            show(prompt["words"])
            if prompt["expect"] == "end":
                return
            if interactive:
                out.write(HINTS.get(prompt["expect"], "> "))
                out.flush()
            text = await lines.next()
            if text is None:
                show("hung up")
                return
            prompt = await gateway.call(
                "phone_dial_answer",
                call=prompt["call"],
                step=prompt["step"],
                query=prompt["query"],
                text=text,
            )
    finally:
        await gateway.close()
