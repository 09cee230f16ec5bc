"""The agents' hook token: random, made at first use, kept owner-only in the agentcomms home.

Claude Code's reporting hooks post to the gateway's loopback listener with it in a header; any
local user can reach loopback, and only this user can read the token (or the agent's settings
file it is written into, 0600). It lets its holder report what an agent does, nothing more.
"""

from __future__ import annotations

from pathlib import Path

from agentcomms.config.home import agentcomms_home, private_secret

TOKEN_FILENAME = "hook.token"


def token_path() -> Path:
    return agentcomms_home() / TOKEN_FILENAME


def hook_token() -> str:
    """This deployment's hook token (made at first use, 0600 in the agentcomms home)."""
    return private_secret(token_path(), "the agents' hook token")
