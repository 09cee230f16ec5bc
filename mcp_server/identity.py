"""Who is calling: the agent a tool acts for, and the bearer tokens that fix it over HTTP.

Without a token (stdio, or HTTP on loopback with no tokens configured) the agent is the tool's
``agent_id`` argument where the tool has one, then ``--agent``, then ``AGENTCOMMS_AGENT_ID``, then
``"default"``. With a token the token decides: an ``agent_id`` naming another agent is refused, so
an agent can neither send as another nor read another's messages.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
from collections.abc import Mapping

from fastmcp.server.auth import AccessToken, TokenVerifier
from fastmcp.server.dependencies import get_access_token

from agentcomms.config import Config
from agentcomms.errors.mcp import NotYourIdentity, ServeRefused
from agentcomms.ids import check_agent_id

AGENT_ENV = "AGENTCOMMS_AGENT_ID"
LEGACY_AGENT_ENV = "AGENTCALL_AGENT_ID"  # the older name; AGENTCOMMS_AGENT_ID wins
FALLBACK_AGENT = "default"


def default_agent_id(cli_agent: str | None, environ: Mapping[str, str] | None = None) -> str:
    """``--agent``, then the environment, then ``"default"``; raises ServeRefused when malformed."""
    environ = os.environ if environ is None else environ
    sources = [
        ("--agent", cli_agent),
        (AGENT_ENV, environ.get(AGENT_ENV)),
        (LEGACY_AGENT_ENV, environ.get(LEGACY_AGENT_ENV)),
    ]
    source, agent = next(((s, v) for s, v in sources if v), ("default", FALLBACK_AGENT))
    try:
        return check_agent_id(agent)
    except ValueError as exc:
        raise ServeRefused(f"{source}: {exc}.") from None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def _digest(token: str) -> bytes:
    # Comparing fixed-length digests keeps even the tokens' lengths out of the timing.
    return hashlib.sha256(token.encode()).digest()


class AgentTokens(TokenVerifier):
    """Bearer tokens from ``agents.<id>.token``: each token names exactly one agent."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        super().__init__()
        self._digests = [(agent, _digest(token)) for agent, token in tokens.items()]
        seen: dict[bytes, str] = {}
        for agent, digest in self._digests:
            if digest in seen:
                raise ServeRefused(
                    f"agents.{seen[digest]}.token and agents.{agent}.token are the same token; "
                    "give each agent its own, or the token cannot say who is calling."
                )
            seen[digest] = agent

    @classmethod
    def from_config(cls, cfg: Config) -> AgentTokens | None:
        """The configured tokens; None when no agent has one."""
        tokens = {
            agent_id: agent.token.get_secret_value()
            for agent_id, agent in cfg.agents.items()
            if agent.token is not None
        }
        return cls(tokens) if tokens else None

    @property
    def agents(self) -> list[str]:
        return [agent for agent, _ in self._digests]

    async def verify_token(self, token: str) -> AccessToken | None:
        offered = _digest(token)
        owner = None
        for agent, digest in self._digests:
            # Compare with every token, no early exit: the timing tells nothing about which matched.
            if hmac.compare_digest(offered, digest) and owner is None:
                owner = agent
        if owner is None:
            return None
        # The token itself is not kept in the request's identity: nothing downstream needs it.
        return AccessToken(token=f"agent:{owner}", client_id=owner, scopes=[])


def token_agent() -> str | None:
    """The agent the current request's bearer token belongs to; None without a token."""
    token = get_access_token()
    return token.client_id if token is not None else None


def calling_agent(asked: str | None, default: str) -> str:
    """The agent a tool acts for (see the module docstring)."""
    owner = token_agent()
    if owner is None:
        return asked or default
    if asked is not None and asked != owner:
        raise NotYourIdentity(
            f"agent_id {asked!r} refused: this connection's token belongs to agent {owner!r}. "
            f"Omit agent_id (or pass {owner!r})."
        )
    return owner
