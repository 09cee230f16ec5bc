"""What the first call through each speech provider waits for it to load, with and without the
worker's warm-up.

    .venv/bin/python -m bench.bench_speech_warm [--runs 5]

Each run is a fresh process that has loaded what a worker has (``workers.main``) and no speech
SDK yet. It speaks and hears once through one provider, then once more: the first's extra time
over the second is what loading cost. The cloud providers speak to the local fakes of their APIs
(``tests/fakes``, through their real SDKs, pointed there by ``base_url``), so network time is the
loopback's and the same both times. With warm-up, the process first runs ``warm_speech`` (what
the shared worker starts in the background) and waits for it, as a call placed a few seconds
after start finds it done; its own time is reported too. Figures are medians over the runs,
printed and written to ``bench/results/speech-warm-latest.*``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROVIDERS = ("elevenlabs", "deepgram", "openai", "local")
GRAMMAR = "#JSGF V1.0;\ngrammar a;\npublic <a> = yes go ahead | no wait;\n"


async def child(name: str, warm: bool) -> dict[str, float]:
    """One fresh process's figures for provider ``name`` (run as ``--child``)."""
    import workers.main  # noqa: F401  what a worker has loaded before any call
    from agentcomms.config import Config, SpeechAccount, STTConfig, TTSConfig, VoiceConfig
    from agentcomms.voice.stt import stt_provider
    from agentcomms.voice.tts import tts_provider
    from agentcomms.voice.tts.local import EspeakSpeech
    from agentcomms.voice.warm import warm_speech
    from tests.fakes import deepgram, elevenlabs, openai_audio

    answer, _ = await EspeakSpeech().synthesize("yes go ahead")
    grammar = Path(tempfile.mkdtemp()) / "answers.gram"
    grammar.write_text(GRAMMAR)
    voice = VoiceConfig(tts=TTSConfig(provider=name), stt=STTConfig(provider=name, grammar=grammar))
    fakes = {
        "deepgram": (deepgram.FakeDeepgram, deepgram.API_KEY),
        "elevenlabs": (elevenlabs.FakeElevenLabs, elevenlabs.API_KEY),
        "openai": (openai_audio.FakeOpenAIAudio, openai_audio.API_KEY),
    }
    if name in fakes:
        make, key = fakes[name]
        fake: Any = make()
        await fake.server.start()
        fake.transcripts = ["yes go ahead"] * 2
        account = SpeechAccount(api_key=key, base_url=fake.base_url)
        voice = voice.model_copy(update={name: account})
    cfg = Config(voice=voice)
    figures: dict[str, float] = {}
    if warm:
        figures["warm_up_ms"] = await warm_speech(cfg) * 1000
    for turn in ("first", "second"):
        started = time.perf_counter()
        await tts_provider(name, cfg).synthesize("shall I deploy to staging?")
        spoke = time.perf_counter()
        await stt_provider(name, cfg).transcribe(answer, "audio/wav")
        heard = time.perf_counter()
        figures[f"{turn}_tts_ms"] = (spoke - started) * 1000
        figures[f"{turn}_stt_ms"] = (heard - spoke) * 1000
    return figures


def run_child(name: str, warm: bool) -> dict[str, float]:
    argv = [sys.executable, "-m", "bench.bench_speech_warm", "--child", name]
    done = subprocess.run([*argv, "--warm"] if warm else argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{name} ({'warm' if warm else 'cold'}) failed:\n{done.stderr}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def measure(runs: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in PROVIDERS:
        for warm in (False, True):
            samples = [run_child(name, warm) for _ in range(runs)]
            row = {
                f"{kind}_loading_ms": round(
                    statistics.median(
                        s[f"first_{kind}_ms"] - s[f"second_{kind}_ms"] for s in samples
                    )
                )
                for kind in ("tts", "stt")
            }
            row["first_turn_ms"] = round(
                statistics.median(s["first_tts_ms"] + s["first_stt_ms"] for s in samples)
            )
            if warm:
                row["warm_up_ms"] = round(statistics.median(s["warm_up_ms"] for s in samples))
            results[f"{name} {'warm' if warm else 'cold'}"] = row
    return results


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        f"# Speech providers' first call, {m['date']}",
        "",
        f"{m['cpus']} CPUs, Python {m['python']}, load average {m['load_average']} at start. "
        f"Medians of {report['runs']} fresh processes each. Loading = the first call's time "
        "minus the second's (TTS, then STT of the same provider; local STT within a grammar). "
        "Warm: after `warm_speech`, which the shared worker runs in the background at start.",
        "",
        "| provider | TTS loading ms | STT loading ms | first turn ms | warm-up ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in report["results"].items():
        lines.append(
            f"| {name} | {row['tts_loading_ms']} | {row['stt_loading_ms']} | "
            f"{row['first_turn_ms']} | {row.get('warm_up_ms', '')} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per row")
    parser.add_argument("--child", choices=PROVIDERS, help=argparse.SUPPRESS)
    parser.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-save", dest="save", action="store_false", help="print only")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(child(args.child, args.warm))))
        return
    from bench.common import machine, write_results

    report = {"machine": machine(), "runs": args.runs}
    report["results"] = measure(args.runs)
    text = markdown(report)
    print(text)
    if args.save:
        write_results("speech-warm", report, text)


if __name__ == "__main__":
    main()
