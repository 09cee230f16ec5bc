"""Changing a few keys of the configuration file from a command (``agentcomms setup``).

The file is changed as written, not as loaded: its ``//`` notes, its ``${VAR}`` references and
every key the command does not touch stay as they were, so a secret kept in the environment stays
there. The changed file must load as every process would load it before it replaces the old one
(written 0600, atomically): a change that would stop ``up`` from starting is refused, and the old
file is kept.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentcomms.config.home import default_config_path, write_private_file
from agentcomms.config.loading import resolve_file
from agentcomms.config.models import Config
from agentcomms.config.reading import ConfigFile, read_file
from agentcomms.errors import ConfigError

# A value that is only a reference: "${TELEGRAM_BOT_TOKEN}" or "${TELEGRAM_BOT_TOKEN:-}".
_WHOLE_REFERENCE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}")


def referenced_variable(value: Any) -> str | None:
    """The environment variable a value is read from, when the value is a reference alone."""
    if not isinstance(value, str):
        return None
    match = _WHOLE_REFERENCE.fullmatch(value)
    return match["name"] if match else None


def raw_value(path: Path | None, *loc: str) -> Any:
    """A key's value as the file writes it (a reference unexpanded); None when absent."""
    target = (path or default_config_path()).expanduser()
    data: Any = read_file(target).data if target.exists() else {}
    for part in loc:
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def section(data: dict[str, Any], *loc: str) -> dict[str, Any]:
    """The object at ``loc`` in a file's data, made where it is missing (or not an object)."""
    for part in loc:
        if not isinstance(data.get(part), dict):
            data[part] = {}
        data = data[part]
    return data


def edit_config(
    path: Path | None,
    change: Callable[[dict[str, Any]], None],
    *,
    new_file: Callable[[], dict[str, Any]] = dict,
) -> Config:
    """Apply ``change`` to the file's data (``new_file()`` when there is no file yet), check
    that the result loads, write it, and return the configuration it loads as."""
    target = (path or default_config_path()).expanduser()
    before = read_file(target) if target.exists() else ConfigFile(target, False, {})
    data = copy.deepcopy(dict(before.data)) if before.exists else new_file()
    change(data)
    try:
        config = resolve_file(ConfigFile(target, True, data)).config
    except ConfigError as exc:
        raise ConfigError(
            f"{exc}\n{target} was left as it was: fix what is named above "
            "(`agentcomms config validate` checks it), then run the command again"
        ) from None
    write_private_file(
        target, json.dumps(data, indent=2, ensure_ascii=False) + "\n", overwrite=True
    )
    return config
