"""Warming up the speech providers a call will use, in the background as a worker starts.

The first call through a provider pays for loading it: its SDK's modules and the client's lazily
built parts (a few hundred milliseconds each for the cloud SDKs), or the local recognizer's
model. Paid at start, in the background, that time is gone from the first turn a human waits
for. Only the providers of the configured chains are loaded, and nothing is sent to them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from agentcomms.config import Config
from agentcomms.voice.stt import stt_chain, stt_provider
from agentcomms.voice.tts import tts_chain, tts_provider

log = logging.getLogger(__name__)

WARM_UP_TASK = "speech warm-up"  # the background task's name, for whoever waits for it


async def warm_speech(cfg: Config) -> float:
    """Load every provider of both chains; the seconds it took. A provider that cannot be
    loaded is skipped: the call that tries it says why."""
    started = time.perf_counter()
    for make, chain in ((tts_provider, tts_chain(cfg)), (stt_provider, stt_chain(cfg))):
        for name in chain:
            try:
                # Imports hold the event loop: in a thread, the worker goes on polling meanwhile.
                provider = await asyncio.to_thread(make, name, cfg)
                warm = getattr(provider, "warm", None)
                if warm is not None:
                    await warm()
            except Exception as exc:
                log.info("speech provider %s not warmed up: %s", name, exc)
    took = time.perf_counter() - started
    log.debug("speech providers warmed up in %.2f s", took)
    return took


@asynccontextmanager
async def speech_warmed(cfg: Config) -> AsyncIterator[None]:
    """Warm up in the background for as long as the block runs; stop it at the block's end."""
    task = asyncio.create_task(warm_speech(cfg), name=WARM_UP_TASK)
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
