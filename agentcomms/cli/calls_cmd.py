"""Phone calls from the terminal: the local phone that rings, a call placed by hand, the list.

Each is a client of the gateway socket (`agentcomms up` must be running).
"""

from __future__ import annotations

import contextlib
import sys
import uuid
from typing import Annotated, Any

import typer
from rich.table import Column, Table

from agentcomms.cli import app
from agentcomms.cli.common import JsonOption, console, fail, print_json, run_async, shown
from agentcomms.client import GatewayClient
from agentcomms.config import load_config
from agentcomms.errors import GatewayError


@app.command()
def phone(
    mute: Annotated[
        bool, typer.Option("--mute", help="Show the agent's words without playing them.")
    ] = False,
    play: Annotated[
        bool,
        typer.Option("--play", help="Play the agent's words also when not in a terminal."),
    ] = False,
    speak: Annotated[
        bool,
        typer.Option(
            "--speak",
            help="Say each answer aloud (espeak-ng) and send the sound, not the text: the "
            "call's speech recognition hears it, as it would a microphone.",
        ),
    ] = False,
    mic: Annotated[
        bool,
        typer.Option(
            "--mic",
            help="Answer aloud: each answer is recorded from the microphone (sox's `rec` or "
            "`arecord`) until you press Enter; type words before Enter to send them instead.",
        ),
    ] = False,
    once: Annotated[bool, typer.Option("--once", help="Exit when the first call ends.")] = False,
    dial: Annotated[
        bool,
        typer.Option(
            "--dial",
            help="Call the deployment instead of waiting for a call: hear the pending "
            "permission requests one by one (type 1 to allow, 2 to deny, 3 to skip), the "
            "agents' last replies, or leave a message for an agent.",
        ),
    ] = False,
) -> None:
    """The local phone: rings here when an agent calls with no phone service configured.

    In a terminal it asks before answering, shows the agent's words (and plays them when a
    player such as sox's `play` is installed) and reads your answer: type it and press Enter
    (`/hangup` or Ctrl-D hangs up); with `--mic`, speak and press Enter. With standard input
    not a terminal it answers every call and says the next line it reads each time it is asked
    (an empty line: silence, or with `--mic` what the microphone heard; the end of the input:
    hang up), e.g. `printf 'yes\\nno\\n' | agentcomms phone --once`.
    """
    from agentcomms.voice.callsystem.local import (
        LocalPhone,
        Microphone,
        find_player,
        find_recorder,
    )

    if dial:
        # Ctrl-C hangs up: the call was ended at the gateway before this is raised.
        with contextlib.suppress(KeyboardInterrupt):
            run_async(_dial, load_config().server.socket())
        return
    if speak and mic:
        fail("--speak and --mic both answer aloud; choose one.")
    microphone = None
    if mic:
        recorder = find_recorder()
        if recorder is None:
            fail(
                "--mic needs a recorder: install sox (`apt install sox`, for `rec`) or "
                "alsa-utils (`arecord`), or answer by typing."
            )
        microphone = Microphone(recorder)
    interactive = sys.stdin.isatty()
    player = None if mute or not (interactive or play) else find_player()
    cfg = load_config()
    phone = LocalPhone(
        cfg.server.socket(),
        interactive=interactive,
        player=player,
        speak=_espeak(cfg) if speak else None,
        microphone=microphone,
        once=once,
    )
    try:
        run_async(_run_phone, phone)
    except KeyboardInterrupt:
        console.print("\nphone off")


async def _dial(socket: Any) -> None:
    import asyncio

    from agentcomms.voice.callsystem.dial import dial
    from agentcomms.voice.callsystem.local import StdinLines

    lines = StdinLines(sys.stdin, asyncio.get_running_loop())
    await dial(socket, lines, interactive=sys.stdin.isatty())


async def _run_phone(phone: Any) -> None:
    import asyncio

    from agentcomms.voice.callsystem.local import StdinLines

    await phone.run(StdinLines(sys.stdin, asyncio.get_running_loop()))


def _espeak(cfg: Any) -> Any:
    from agentcomms.voice.tts.local import EspeakSpeech

    voice = EspeakSpeech()

    async def speak(text: str) -> bytes:
        data, _ = await voice.synthesize(text)
        return data

    return speak


@app.command()
def calls(
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="Only this agent's.")] = None,
    active: Annotated[bool, typer.Option("--active", help="Only calls still up.")] = False,
    limit: Annotated[int, typer.Option("-n", min=1, max=1000, help="How many.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """Phone calls, newest first: who called, how it went, how long it lasted."""
    params: dict[str, Any] = {"active": active, "limit": limit}
    if agent:
        params["agent_id"] = agent
    result = _gateway("calls", **params)
    if as_json:
        print_json(result)
        return
    # Call ids are copied whole into continue/end commands: never wrapped.
    table = Table(Column("call", no_wrap=True), "agent", "phone", "status", "started", "duration")
    for c in result["calls"]:
        duration = c["duration_seconds"]
        table.add_row(
            c["id"],
            c["agent_id"] or "(a call in)",
            shown(c["phone_number"] or "-"),
            c["status"],
            c["started_at"][:19].replace("T", " "),
            "-" if duration is None else f"{duration:.0f} s",
        )
    console.print(table)


@app.command()
def call(
    agent: Annotated[str, typer.Argument(help="The agent the call is from.")],
    message: Annotated[str, typer.Argument(help="What the agent says first.")],
    goodbye: Annotated[
        str | None, typer.Option("--goodbye", help="Said before hanging up.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Place a call as AGENT to its human (for trying things out): say MESSAGE, print the
    answer, hang up. Without a phone service configured, `agentcomms phone` rings."""
    result = run_async(_call, agent, message, goodbye)
    if as_json:
        print_json(result)
        return
    first = result["first"]
    if first["status"] in ("answered", "timed-out"):
        console.print(f"{shown(first['response']) or '(nothing was said)'}")
        if first.get("note"):
            console.print(f"note: {shown(first['note'])}")
    else:
        fail(f"call {first['call_id']}: {first.get('note') or first['status']}")


async def _call(agent: str, message: str, goodbye: str | None) -> dict[str, Any]:
    socket = load_config().server.socket()
    async with GatewayClient(socket) as gateway:
        first = await gateway.call(
            "call", agent_id=agent, message=message, request_id=str(uuid.uuid4())
        )
        ended = None
        if first["status"] in ("answered", "timed-out"):
            try:
                ended = await gateway.call(
                    "call_end", call_id=first["call_id"], message=goodbye, agent_id=agent
                )
            except GatewayError:
                pass  # the human hung up first
    return {"first": first, "ended": ended}


def _gateway(method: str, **params: Any) -> Any:
    from agentcomms.client import call as gateway_call

    return run_async(gateway_call, load_config().server.socket(), method, **params)
