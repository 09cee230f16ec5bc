"""A Deepgram SDK client for one account, speaking to the account's `base_url` when it has one
(a proxy, a test) for both its REST and WebSocket hosts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

from agentcomms.voice.providers import Account

if TYPE_CHECKING:  # the SDK is imported when a call speaks or hears through it
    from deepgram import AsyncDeepgramClient


def deepgram_client(account: Account, http: httpx.AsyncClient) -> AsyncDeepgramClient:
    from deepgram import AsyncDeepgramClient
    from deepgram.environment import DeepgramClientEnvironment

    environment = DeepgramClientEnvironment.PRODUCTION
    if account.base_url:
        base = account.base_url.rstrip("/")
        ws = "ws" + base.removeprefix("http")  # http->ws, https->wss
        environment = DeepgramClientEnvironment(base=base, production=ws, agent=ws, agent_rest=base)
    # Retries are the activity's (and then the next provider's), not the SDK's.
    return AsyncDeepgramClient(
        api_key=account.api_key, environment=environment, httpx_client=http, max_retries=0
    )
