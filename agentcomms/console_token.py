"""The console's token: random, made at first use, kept owner-only in the agentcomms home.

Standard library only at import, so `agentcomms status` can print the console's address with it
without loading the web stack. Whoever holds the token may answer approvals and type into panes
from the console, so it is printed to the user's own terminal and never logged.
"""

from __future__ import annotations

from pathlib import Path

from agentcomms.config.home import agentcomms_home, private_secret

TOKEN_FILENAME = "console.token"


def token_path() -> Path:
    return agentcomms_home() / TOKEN_FILENAME


def console_token() -> str:
    """This host's console token (made at first use, 0600 in the agentcomms home)."""
    return private_secret(token_path(), "the console's token")


def with_token(address: str) -> str:
    """The console's address as a person opens it (``…/?t=TOKEN``); the address alone when
    this user cannot read the token."""
    try:
        token = token_path().read_text(encoding="ascii").strip()
    except OSError:
        return address
    return f"{address}?t={token}" if token else address
