"""Showing a configuration without its secrets: ``SecretStr`` values, secret-named keys, URL passwords."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr

REDACTED = "***"

_SECRET_KEY = re.compile(r"token|api_?key|passw(or)?d|secret|credential|private_key", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"(?<=://)([^/:@\s]*):([^/@\s]+)@")


def is_secret_key(name: str) -> bool:
    """Whether a key's name says it holds a secret (token, auth_token, api_key, password…)."""
    return bool(_SECRET_KEY.search(name))


def mask_url_password(text: str) -> str:
    """``postgresql://u:hunter2@db/x`` -> ``postgresql://u:***@db/x``."""
    return _URL_PASSWORD.sub(lambda m: f"{m[1]}:{REDACTED}@", text)


def redacted(config: BaseModel) -> dict[str, Any]:
    """The configuration as plain JSON data with every secret replaced by ``"***"``.

    Redacted: every ``SecretStr``, any value under a key whose name looks secret (token,
    auth_token, api_key, password, secret…) and the password in a URL. ``null`` stays ``null``,
    so an unset secret reads as unset.
    """
    result: dict[str, Any] = _redact(config.model_dump(), None)
    return result


def _redact(value: Any, key: str | None) -> Any:
    if isinstance(value, dict):
        return {k: _redact(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v, key) for v in value]
    if value is None:
        return None
    if isinstance(value, SecretStr) or (key is not None and is_secret_key(key)):
        return REDACTED
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, str):
        return mask_url_password(value)
    return value
