"""Our own overhead per call turn on the local phone, beside the speech providers' own time.

    .venv/bin/python -m bench.bench_calls [--turns 50] [--think-ms 0]

One call placed by ``agentcomms mcp`` (a real process, driven by the official ``mcp`` client over
stdio), answered by a phone speaking the gateway's phone protocol in this process; the stack
(Temporal dev server on a database file, worker, gateway) runs here too, as ``agentcomms up``
runs it. Each turn measures:

- **told what to play**: from ``continue_call`` sent to the phone's ``phone_wait`` returning the
  turn's line (text and audio reference). It includes the TTS activity (espeak-ng).
- **recording → transcript**: from the phone's ``heard`` event (a WAV recording, sent to the
  gateway) to ``continue_call``'s result in the MCP client. It includes the STT activity
  (pocketsphinx with a grammar).
- the same with a **typed** answer (no recording, no STT).

``--think-ms`` pauses between an answer and the next question, as an agent does while it
thinks (the call's record of the last turn is written meanwhile). Provider time is what the
speech activities measured around the provider call itself, read back from the call's workflow
history; the overhead is the turn's time minus it. Figures are printed and written
to ``bench/results/calls-latest.*``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import ClientSession
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from agentcomms.client import GatewayClient
from agentcomms.config import STTConfig, VoiceConfig
from agentcomms.voice.tts.local import EspeakSpeech
from agentcomms.workflow_ids import call_workflow_id
from bench.bench_mcp import session
from bench.common import latency_page, machine, summarize, temporal, write_results

AGENTCOMMS = Path(sys.executable).parent / "agentcomms"
AGENT = "bench-caller"
WARMUP = 5
ANSWER = "yes go ahead"
GRAMMAR = f"#JSGF V1.0;\ngrammar a;\npublic <a> = {ANSWER} | no wait | call me later;\n"


class BenchPhone:
    def __init__(self, rpc: GatewayClient) -> None:
        self.rpc = rpc
        self.known: dict[str, int] = {}

    async def until(self, test: Any) -> dict[str, Any]:
        while True:
            result = await self.rpc.call("phone_wait", known=self.known, timeout=20)
            for line in result["calls"]:
                self.known[line["call_id"]] = line["version"]
                if test(line):
                    return dict(line)

    async def event(self, call_id: str, kind: str, **fields: Any) -> None:
        await self.rpc.call("phone_event", call_id=call_id, kind=kind, phone_id="bench", **fields)


async def tool(s: ClientSession, name: str, **args: Any) -> dict[str, Any]:
    result = await s.call_tool(name, args)
    if result.is_error or result.structured_content is None:
        raise AssertionError(f"{name}: {result.content}")
    content: dict[str, Any] = result.structured_content
    return content


async def measure(turns: int, think_s: float) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="acb-call-"))  # short: a socket path has 108 bytes
    try:
        grammar = tmp / "a.gram"
        grammar.write_text(GRAMMAR)
        voice = VoiceConfig(stt=STTConfig(provider="local", grammar=grammar))
        home = tmp / "home"
        async with (
            temporal(home, voice=voice) as rt,
            GatewayClient(rt.cfg.server.socket()) as rpc,
            session(
                str(AGENTCOMMS), ["mcp", "--agent", AGENT], {"AGENTCOMMS_HOME": str(home)}
            ) as mcp,
        ):
            return await _measure(rt.client, BenchPhone(rpc), mcp, turns, think_s)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def _measure(
    client: Client, phone: BenchPhone, mcp: ClientSession, turns: int, think_s: float
) -> dict[str, Any]:
    recording, _ = await EspeakSpeech().synthesize(ANSWER)
    audio_b64 = base64.b64encode(recording).decode("ascii")
    first = asyncio.create_task(tool(mcp, "initiate_call", message="Benchmark call. Ready?"))
    ringing = await phone.until(lambda line: line["state"] == "ringing")
    call_id = ringing["call_id"]
    await phone.event(call_id, "answered")
    line = await phone.until(lambda line: line["expect"] == "answer")
    await phone.event(call_id, "heard", turn=line["turn"], text="ready")
    await first

    told: dict[int, float] = {}
    answered: dict[int, float] = {}
    modes: dict[int, str] = {}
    recorded: list[int] = []  # the turns answered with a recording, in order
    for i in range(2 * (turns + WARMUP)):
        mode = "recording" if i % 2 == 0 else "typed"
        await asyncio.sleep(think_s)
        start = time.perf_counter()
        asked = asyncio.create_task(
            tool(mcp, "continue_call", call_id=call_id, message=f"Question {i}?")
        )
        line = await phone.until(
            lambda line, asked=f"Question {i}?": line["expect"] == "answer" and line["say"] == asked
        )
        turn = line["turn"]
        told[turn] = time.perf_counter() - start
        start = time.perf_counter()
        if mode == "recording":
            recorded.append(turn)
            await phone.event(call_id, "heard", turn=turn, audio_b64=audio_b64)
        else:
            await phone.event(call_id, "heard", turn=turn, text=ANSWER)
        result = await asked
        answered[turn] = time.perf_counter() - start
        if result["response"] != ANSWER:
            raise AssertionError(f"turn {turn} heard {result['response']!r}, not {ANSWER!r}")
        if i >= 2 * WARMUP:
            modes[turn] = mode
    await tool(mcp, "end_call", call_id=call_id)

    tts_s, stt_in_order = await provider_times(client, call_workflow_id(call_id))
    stt_s = dict(zip(recorded, stt_in_order, strict=True))
    figures: dict[str, list[float]] = {k: [] for k in ROWS}
    for turn, mode in modes.items():
        figures["told what to play (total)"].append(told[turn] * 1000)
        figures["told what to play: TTS (espeak-ng)"].append(tts_s[turn] * 1000)
        figures["told what to play: our overhead"].append((told[turn] - tts_s[turn]) * 1000)
        if mode == "recording":
            figures["recording → transcript (total)"].append(answered[turn] * 1000)
            figures["recording → transcript: STT (pocketsphinx)"].append(stt_s[turn] * 1000)
            overhead = (answered[turn] - stt_s[turn]) * 1000
            figures["recording → transcript: our overhead"].append(overhead)
        else:
            figures["typed answer → response (no STT)"].append(answered[turn] * 1000)
    return {name: summarize(values) for name, values in figures.items()}


ROWS = (
    "told what to play (total)",
    "told what to play: TTS (espeak-ng)",
    "told what to play: our overhead",
    "recording → transcript (total)",
    "recording → transcript: STT (pocketsphinx)",
    "recording → transcript: our overhead",
    "typed answer → response (no STT)",
)


async def provider_times(client: Client, workflow_id: str) -> tuple[dict[int, float], list[float]]:
    """Per turn, the seconds the TTS and STT providers themselves took, as the speech activities
    measured them around the provider call and recorded them in the call's history."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    tts: dict[int, float] = {}
    stt: list[float] = []
    for event in history.events:
        if event.event_type != EventType.EVENT_TYPE_MARKER_RECORDED:
            continue
        payloads = event.marker_recorded_event_attributes.details["result"].payloads
        if not payloads:
            continue
        result = json.loads(payloads[0].data)
        if not isinstance(result, dict) or result.get("took_ms") is None:
            continue
        if "name" in result:  # an AudioRef: "<call id>/007-agent.wav" is turn 7's speech
            tts[int(result["name"].split("/")[1][:3])] = result["took_ms"] / 1000
        else:
            stt.append(result["took_ms"] / 1000)
    return tts, stt


def markdown(report: dict[str, Any]) -> str:
    about = (
        f"One call on the local phone, {report['turns']} turns of each kind "
        f"({report['think_ms']:g} ms between an answer and the next question), driven through "
        "`agentcomms mcp` over stdio. Provider times are measured by the speech activities around "
        "the provider call (read back from the workflow history); overhead = total - provider."
    )
    return latency_page("Call turn benchmark", report, about, "per turn")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=50, help="timed turns of each kind")
    parser.add_argument(
        "--think-ms", type=float, default=0, help="pause before each question, as an agent thinks"
    )
    parser.add_argument("--no-save", dest="save", action="store_false", help="print only")
    args = parser.parse_args()
    report = {"machine": machine(), "turns": args.turns, "think_ms": args.think_ms}
    report["results"] = asyncio.run(measure(args.turns, args.think_ms / 1000))
    text = markdown(report)
    print(text)
    if args.save:
        write_results("calls", report, text)


if __name__ == "__main__":
    main()
