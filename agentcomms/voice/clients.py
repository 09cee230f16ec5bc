"""The cloud providers' SDK clients for one account: each speaks to the account's `base_url` when it
has one (a proxy, a test), retries nothing itself (retries are the activity's, then the next
provider's), and turns the provider's HTTP errors into what they mean for the chain (`refusal`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx

from agentcomms.voice.accounts import HTTP_TIMEOUT_S, Account, refusal

if TYPE_CHECKING:  # each SDK is imported when a call speaks or hears through it
    from deepgram import AsyncDeepgramClient
    from elevenlabs import AsyncElevenLabs
    from openai import AsyncOpenAI


@asynccontextmanager
async def deepgram_client(account: Account) -> AsyncIterator[AsyncDeepgramClient]:
    from deepgram import AsyncDeepgramClient
    from deepgram.core.api_error import ApiError
    from deepgram.environment import DeepgramClientEnvironment

    environment = DeepgramClientEnvironment.PRODUCTION
    if account.base_url:  # for both its REST and WebSocket hosts
        base = account.base_url.rstrip("/")
        ws = "ws" + base.removeprefix("http")  # http->ws, https->wss
        environment = DeepgramClientEnvironment(base=base, production=ws, agent=ws, agent_rest=base)
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
        client = AsyncDeepgramClient(
            api_key=account.api_key, environment=environment, httpx_client=http, max_retries=0
        )
        try:
            yield client
        except ApiError as exc:
            raise refusal("Deepgram", account, exc.status_code, exc.body) from None


@asynccontextmanager
async def elevenlabs_client(account: Account) -> AsyncIterator[AsyncElevenLabs]:
    """The client retries unless told not to: each request says max_retries 0."""
    from elevenlabs import AsyncElevenLabs
    from elevenlabs.core.api_error import ApiError

    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
        client = AsyncElevenLabs(
            api_key=account.api_key, base_url=account.base_url, httpx_client=http
        )
        try:
            yield client
        except ApiError as exc:
            raise refusal("ElevenLabs", account, exc.status_code, exc.body) from None


@asynccontextmanager
async def openai_client(account: Account) -> AsyncIterator[AsyncOpenAI]:
    import openai

    client = openai.AsyncOpenAI(
        api_key=account.api_key,
        base_url=account.base_url,
        max_retries=0,
        timeout=HTTP_TIMEOUT_S,  # as the other providers: the SDK's own default is 600 s
    )
    try:
        yield client
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        # Not OpenAI's message: it quotes part of the key.
        raise refusal("OpenAI", account, exc.status_code, None) from None
    finally:
        await client.close()


# Each account's client, by the name the config gives the provider.
CLIENTS: dict[str, Callable[[Account], AbstractAsyncContextManager[Any]]] = {
    "deepgram": deepgram_client,
    "elevenlabs": elevenlabs_client,
    "openai": openai_client,
}
