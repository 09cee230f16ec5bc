"""Reading the file before any schema, and reading only the keys a client uses.

:func:`read_file` holds the steps every reader shares: the file must be a private regular file
of sane size, and it is parsed as JSON that remembers duplicate keys. :mod:`.loading` goes on to
expand, override and validate the whole of it; :func:`read_keys` does the same for a few key paths
alone. Standard library only: `agentcomms send`, `status`, the MCP server and an agent's hooks
find the gateway here without loading pydantic, and a `${TELEGRAM_BOT_TOKEN}` that only the
gateway uses need not be set where the agents run.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentcomms.address import DEFAULT_ADDRESS
from agentcomms.config.env import apply_env_overrides
from agentcomms.config.expand import COMMENT_PREFIX, Expander
from agentcomms.config.home import agentcomms_home, default_config_path, default_socket
from agentcomms.config.keys import Loc, dotted
from agentcomms.errors import ConfigError

SOCKET_KEY: Loc = ("server", "socket_path")
TEMPORAL_ADDRESS_KEY: Loc = ("temporal", "address")


@dataclass
class ConfigFile:
    """The file as parsed: comment keys and ``${VAR}`` still in it, duplicates remembered."""

    path: Path
    exists: bool
    data: dict[str, Any]

    @property
    def label(self) -> str:
        return str(self.path)


def read_file(path: Path | None = None) -> ConfigFile:
    """The parsed file at ``path`` (default :func:`default_config_path`); a missing default file
    reads as ``{}``, a missing explicit one is an error."""
    explicit = path is not None
    path = (path or default_config_path()).expanduser()
    if not path.exists():
        if explicit:
            raise ConfigError(
                f"{path} does not exist; create it with `agentcomms config init -o {path}`"
            )
        return ConfigFile(path, False, {})
    _check_regular_file(path)
    _check_private(path)
    return ConfigFile(path, True, _parse(_read(path), str(path)))


def read_keys(
    wanted: Sequence[Loc],
    *,
    text: Sequence[Loc] | None = None,
    path: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[ConfigFile, dict[str, Any], dict[Loc, str]]:
    """The values at the ``wanted`` key paths alone, nested as in the file, with ``${VAR}``
    expanded and ``AGENTCOMMS_*`` overrides applied there and nowhere else.

    A problem elsewhere in the file (an unset variable, a misspelt key) is not this reader's to
    find: the process that uses that key reports it. ``text`` names the keys whose overrides
    are taken as text, any other override being parsed as JSON; without it the schema says
    (loading pydantic). Returns the file, the
    values, and key path -> variable for each override applied.
    """
    environ = os.environ if environ is None else environ
    file = read_file(path)
    expander = Expander(file.label, environ)
    picked: dict[str, Any] = {}
    for loc in wanted:
        found, value = _lookup(file.data, loc)
        if found:
            _place(picked, loc, expander.walk(value, loc))
    if expander.problems:
        raise ConfigError("\n".join(expander.problems))
    if text is None:
        env = apply_env_overrides(picked, environ, only=wanted)
    else:
        texts = set(text)
        env = apply_env_overrides(
            picked, environ, only=wanted, annotation=lambda loc: str if loc in texts else None
        )
    return file, picked, env


def gateway_socket(environ: Mapping[str, str] | None = None) -> Path:
    """The gateway's Unix socket: ``server.socket_path``, else ``<home>/daemon.sock``."""
    file, picked, env = read_keys([SOCKET_KEY], text=[SOCKET_KEY], environ=environ)
    value = _at(picked, SOCKET_KEY)
    if value is None or value == "":  # an empty string means unset, as in every section
        return default_socket().expanduser()
    if not isinstance(value, str):
        where = env.get(SOCKET_KEY, file.label)
        raise ConfigError(f"{where}: {dotted(SOCKET_KEY)}: expected a file path (a string)")
    return Path(value).expanduser()


def temporal_address(environ: Mapping[str, str] | None = None) -> str:
    """``temporal.address``, else the default (what `status` says without Temporal's SDK)."""
    file, picked, env = read_keys(
        [TEMPORAL_ADDRESS_KEY], text=[TEMPORAL_ADDRESS_KEY], environ=environ
    )
    value = _at(picked, TEMPORAL_ADDRESS_KEY)
    if value is None:
        return DEFAULT_ADDRESS
    if not isinstance(value, str):
        where = env.get(TEMPORAL_ADDRESS_KEY, file.label)
        raise ConfigError(f"{where}: {dotted(TEMPORAL_ADDRESS_KEY)}: expected HOST:PORT (a string)")
    return value


def _lookup(data: Any, loc: Loc) -> tuple[bool, Any]:
    for part in loc:
        if not isinstance(data, dict) or part not in data:
            return False, None
        data = data[part]
    return True, data


def _at(data: dict[str, Any], loc: Loc) -> Any:
    return _lookup(data, loc)[1]


def _place(data: dict[str, Any], loc: Loc, value: Any) -> None:
    for part in loc[:-1]:
        data = data.setdefault(str(part), {})
    data[str(loc[-1])] = value


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
        from agentcomms.config.problems import json_kind  # pydantic's: only for this mistake

        raise ConfigError(
            f"{label}: expected a JSON object {{...}} at the top, got {json_kind(value)}"
        )
    return value
