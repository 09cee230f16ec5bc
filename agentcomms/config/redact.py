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


def mask_url_password(text: str, *, mark: str = REDACTED) -> str:
    """``postgresql://u:hunter2@db/x`` -> ``postgresql://u:***@db/x``."""
    return _URL_PASSWORD.sub(lambda m: f"{m[1]}:{mark}@", text)


# `NAME=value`, `"name": "value"`, `--name value` where the name looks secret, and the shapes of
# well-known API keys and tokens, wherever they stand.
_SECRET_ASSIGNMENT = re.compile(
    r"""(?P<name>[\w.-]*(?:token|api_?key|passw(?:or)?d|secret|credential|private_key)[\w.-]*)"""
    r"""(?P<sep>["']?\s*[:=]\s*["']?|["']?\s+)(?P<value>[^\s"',;&|]{3,})""",
    re.IGNORECASE,
)
_KNOWN_TOKEN = re.compile(
    r"\b(?:sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|\d{6,}:[A-Za-z0-9_-]{30,})\b"
)
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/-]{8,}=*")


def mask_secrets(text: str, *, mark: str = REDACTED) -> str:
    """Free text (a command an agent wants to run) with the secrets we can spot replaced by
    `mark`: values named like secrets, bearer tokens, URL passwords and well-known key shapes."""
    text = mask_url_password(text, mark=mark)
    text = _BEARER.sub(lambda m: m[1] + mark, text)
    text = _KNOWN_TOKEN.sub(mark, text)
    return _SECRET_ASSIGNMENT.sub(lambda m: m["name"] + m["sep"] + mark, text)


def redacted(config: BaseModel) -> dict[str, Any]:
    """The configuration as plain JSON data with every secret replaced by ``"***"``.

    Redacted: every ``SecretStr``, any value under a key whose name looks secret (token,
    auth_token, api_key, password, secret…) and the password in a URL. ``null`` stays ``null``,
    so an unset secret reads as unset.
    """
    # By alias: a key is shown as it is written in the file (quiet_hours.from).
    result: dict[str, Any] = _redact(config.model_dump(by_alias=True), None)
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
