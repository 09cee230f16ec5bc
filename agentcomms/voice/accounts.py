"""A cloud speech provider's account, and what the provider's HTTP answers mean for a chain.

Below both ``voice.providers`` (which chooses the providers and their keys) and ``voice.clients``
(the SDK clients that reach them), so neither imports the other to share these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentcomms.errors import SpeechProviderUnavailable

HTTP_TIMEOUT_S = 50.0  # a provider's answer, inside the speech activity's 60 s


@dataclass(frozen=True)
class Account:
    api_key: str
    base_url: str | None
    key_name: str  # the configuration key the key came from, for telling the user

    def __repr__(self) -> str:  # never the key itself
        return f"Account(key_name={self.key_name!r}, base_url={self.base_url!r})"


def refusal(provider: str, account: Account, status: int | None, body: Any) -> Exception:
    """What a provider's HTTP error means for the chain.

    401/403: a key to fix, and other 4xx a request the provider will never take: permanent
    (``SpeechProviderUnavailable``, the next provider is tried at once). 408, 429, 5xx and no
    answer are worth retrying (a plain error: retried, then the next provider).
    """
    detail = str(body)[:200] if body else "no detail"
    if status in (401, 403):
        return SpeechProviderUnavailable(
            f"{provider} refused the key in {account.key_name} ({status}): fix that key"
        )
    if status is not None and 400 <= status < 500 and status not in (408, 409, 429):
        return SpeechProviderUnavailable(f"{provider} refused the request ({status}): {detail}")
    return RuntimeError(f"{provider} answered {status}: {detail}")
