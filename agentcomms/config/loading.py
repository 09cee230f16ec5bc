"""Reading the file into a :class:`Config`: permissions, JSON, expansion, overrides, validation.

Every problem found is collected and raised at once as one :class:`ConfigError`, one line each.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentcomms.config.env import apply_env_overrides
from agentcomms.config.expand import COMMENT_PREFIX, Expander
from agentcomms.config.home import agentcomms_home, default_config_path
from agentcomms.config.keys import Loc, dotted, key_paths
from agentcomms.config.models import Config
from agentcomms.config.problems import describe, json_kind
from agentcomms.errors import ConfigError


@dataclass
class ResolvedConfig:
    """A loaded configuration and where its values came from (what ``config show`` prints)."""

    config: Config
    path: Path
    file_exists: bool
    file_keys: set[Loc] = field(default_factory=set)  # every key path present in the file
    env: dict[Loc, str] = field(default_factory=dict)  # key path -> variable that set it

    def source(self, loc: Loc) -> str:
        """``env NAME``, ``file`` or ``default`` for a key path."""
        for i in range(len(loc), 0, -1):
            if loc[:i] in self.env:
                return f"env {self.env[loc[:i]]}"
        return "file" if loc in self.file_keys else "default"


def load_config(path: Path | None = None) -> Config:
    """Read the configuration: the file, then ``AGENTCOMMS_*`` overrides, then defaults.

    ``path`` defaults to :func:`default_config_path`; a missing default file means defaults (plus
    environment overrides), a missing explicit ``path`` is an error. Every problem raises
    :class:`ConfigError` with one line per problem and no secret in it.
    """
    return resolve_config(path).config


def resolve_config(path: Path | None = None) -> ResolvedConfig:
    """:func:`load_config`, keeping track of where each value came from."""
    explicit = path is not None
    path = (path or default_config_path()).expanduser()
    label = str(path)
    data: dict[str, Any] = {}
    exists = path.exists()
    if exists:
        _check_regular_file(path)
        _check_private(path)
        data = _parse(_read(path), label)
    elif explicit:
        raise ConfigError(
            f"{path} does not exist; create it with `agentcomms config init -o {path}`"
        )

    expander = Expander(label)
    data = expander.walk(data, ())
    file_keys = set(key_paths(data))
    env = apply_env_overrides(data, os.environ)

    problems = list(expander.problems)
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            loc: Loc = tuple(err["loc"])
            if any(loc[: len(bad)] == bad for bad in expander.failed):
                continue  # already reported: the reference could not be expanded
            where = next((env[loc[:i]] for i in range(len(loc), 0, -1) if loc[:i] in env), label)
            problems.append(f"{where}: {dotted(loc)}: {describe(err, loc)}{expander.note(loc)}")
        if not problems:  # pragma: no cover - every validation error maps to a line above
            raise ConfigError(f"{label}: invalid configuration") from None
    if problems:
        raise ConfigError("\n".join(problems))
    return ResolvedConfig(config, path, exists, file_keys, env)


# A configuration is a few kilobytes; a bigger file is a mistake that should not fill memory.
MAX_CONFIG_BYTES = 1_000_000


def _check_regular_file(path: Path) -> None:
    """Refuse what is not a config file at all: a directory, a FIFO (reading it would hang)."""
    try:
        info = path.stat()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError(
            f"{path} is a directory; the configuration is one JSON file. Move the directory "
            "away, then run `agentcomms config init`"
        )
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{path} is not a regular file; the configuration is one JSON file")
    if info.st_size > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{path} is {info.st_size:,} bytes; a configuration is a few kilobytes "
            f"(limit {MAX_CONFIG_BYTES:,}). Is it the right file?"
        )


def _check_private(path: Path) -> None:
    """Refuse a config others could read (it holds secrets) or swap (in a home they can write)."""
    if os.name != "posix":
        return
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        home = agentcomms_home()
        in_home = path.parent.resolve() == home.resolve()
        home_mode = stat.S_IMODE(home.stat().st_mode) if in_home else 0
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    if mode & 0o077:
        raise ConfigError(
            f"{path} is accessible to other users (mode {mode:04o}) and may hold secrets; "
            f"make it private with: chmod 600 {_quote(path)}"
        )
    if home_mode & 0o022:
        raise ConfigError(
            f"{home} is writable by other users (mode {home_mode:04o}), who could replace the "
            f"config; fix it with: chmod 700 {_quote(home)}"
        )


def _quote(path: Path) -> str:
    return shlex.quote(str(path))


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (bad byte at offset {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None


class _JsonObject(dict[str, Any]):
    """A parsed JSON object that remembers keys it saw twice (json keeps the last, silently)."""

    duplicates: list[str]


def _object(pairs: list[tuple[str, Any]]) -> _JsonObject:
    obj = _JsonObject()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj and not key.startswith(COMMENT_PREFIX):
            obj.duplicates.append(key)
        obj[key] = value
    return obj


def _parse(text: str, label: str) -> dict[str, Any]:
    if not text.strip():
        raise ConfigError(
            f"{label}: the file is empty; write {{}} for all defaults, "
            "or run `agentcomms config init --force` for a starter config"
        )
    try:
        value = json.loads(text, object_pairs_hook=_object)
    except RecursionError:
        raise ConfigError(f"{label}: the JSON is nested too deeply to be a configuration") from None
    except json.JSONDecodeError as exc:
        # Only the parser's own words and the position: echoing the line could echo a secret.
        hint = ""
        if text[exc.pos : exc.pos + 2] in ("//", "/*") or text[exc.pos : exc.pos + 1] == "#":
            hint = ' (JSON has no comments; use a "//" key instead: {"//": "a note"})'
        elif exc.msg.startswith("Expecting property name"):
            hint = " (a trailing comma before }, or a key without double quotes?)"
        raise ConfigError(
            f"{label}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}{hint}"
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(
            f"{label}: expected a JSON object {{...}} at the top, got {json_kind(value)}"
        )
    return value
