"""Reading the file into a :class:`Config`: permissions, JSON, expansion, overrides, validation.

Every problem found is collected and raised at once as one :class:`ConfigError`, one line each.
The file itself is read by :mod:`.reading`, which also serves the clients that need a few keys.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentcomms.config.env import apply_env_overrides
from agentcomms.config.expand import Expander
from agentcomms.config.keys import Loc, dotted, key_paths
from agentcomms.config.models import Config
from agentcomms.config.problems import describe
from agentcomms.config.reading import ConfigFile, read_file, read_keys
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
    return resolve_file(read_file(path))


def resolve_file(file: ConfigFile) -> ResolvedConfig:
    """A parsed file (maybe not written yet: see :mod:`.editing`) as every process would load
    it: ``${VAR}`` expanded, ``AGENTCOMMS_*`` applied, validated."""
    expander = Expander(file.label)
    data = expander.walk(file.data, ())
    file_keys = set(key_paths(data))
    env = apply_env_overrides(data, os.environ)
    config = _validate(data, file.label, env, list(expander.problems), expander)
    return ResolvedConfig(config, file.path, file.exists, file_keys, env)


def load_sections(sections: Sequence[str]) -> Config:
    """A :class:`Config` of the named top-level sections as the file and the environment set
    them, and every other section at its defaults, unread.

    For a process that uses a few sections only (the MCP server: the socket, its logging): a
    problem in another section, such as an unset ``${TELEGRAM_BOT_TOKEN}`` that only the gateway
    needs, does not stop it.
    """
    file, picked, env = read_keys([(s,) for s in sections])
    return _validate(picked, file.label, env, [])


def _validate(
    data: dict[str, Any],
    label: str,
    env: dict[Loc, str],
    problems: list[str],
    expander: Expander | None = None,
) -> Config:
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            loc: Loc = tuple(err["loc"])
            if expander and any(loc[: len(bad)] == bad for bad in expander.failed):
                continue  # already reported: the reference could not be expanded
            where = next((env[loc[:i]] for i in range(len(loc), 0, -1) if loc[:i] in env), label)
            note = expander.note(loc) if expander else ""
            problems.append(f"{where}: {dotted(loc)}: {describe(err, loc)}{note}")
        if not problems:  # pragma: no cover - every validation error maps to a line above
            raise ConfigError(f"{label}: invalid configuration") from None
    if problems:
        raise ConfigError("\n".join(problems))
    return config
