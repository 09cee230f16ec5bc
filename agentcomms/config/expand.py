"""``${VAR}`` expansion in string values, after parsing; comment keys and duplicate keys too.

``${VAR}`` and ``${VAR:-default}`` are expanded inside string values (never keys), after parsing,
so a value holding quotes or backslashes cannot break the JSON. ``:-`` takes the default when the
variable is unset *or empty*, as in the shell. ``$${`` is a literal ``${``; a ``$`` not followed
by ``{`` is just a dollar sign. An unset variable without a default is an error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from agentcomms.config.keys import Loc, dotted

COMMENT_PREFIX = "//"

# `$${` is a literal `${`; `${NAME}` or `${NAME:-default}`; any other `${` is malformed.
_REFERENCE = re.compile(
    r"\$\$\{|\$\{(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\})?"
)


class Expander:
    """Drops comment keys, reports duplicate keys and expands ``${VAR}`` in string values."""

    def __init__(self, label: str, environ: Mapping[str, str] = os.environ) -> None:
        self.label = label
        self.environ = environ
        self.problems: list[str] = []
        self.failed: list[Loc] = []
        self.used: dict[Loc, list[str]] = {}

    def walk(self, value: Any, loc: Loc) -> Any:
        if isinstance(value, dict):
            for key in getattr(value, "duplicates", ()):
                self._problem((*loc, key), "duplicate key (only the last would count); keep one")
            return {
                k: self.walk(v, (*loc, k))
                for k, v in value.items()
                if not k.startswith(COMMENT_PREFIX)
            }
        if isinstance(value, list):
            return [self.walk(v, (*loc, i)) for i, v in enumerate(value)]
        if isinstance(value, str) and "${" in value:
            return self._expand(value, loc)
        return value

    def _expand(self, text: str, loc: Loc) -> str:
        failed = False

        def replace(m: re.Match[str]) -> str:
            nonlocal failed
            if m[0] == "$${":
                return "${"
            name, default = m["name"], m["default"]
            if name is None:
                failed = True
                self._problem(
                    loc,
                    f"malformed ${{...}} at character {m.start() + 1}: write ${{NAME}} or "
                    "${NAME:-default}, or $${ for a literal ${",
                )
                return ""
            self.used.setdefault(loc, []).append(name)
            value = self.environ.get(name)
            if default is not None and not value:
                return default
            if value is None:
                failed = True
                self._problem(
                    loc,
                    f"environment variable {name} is not set "
                    f"(use ${{{name}:-default}} for a default)",
                )
                return ""
            return value

        result = _REFERENCE.sub(replace, text)
        if failed:
            self.failed.append(loc)
        return result

    def _problem(self, loc: Loc, message: str) -> None:
        self.problems.append(f"{self.label}: {dotted(loc)}: {message}")

    def note(self, loc: Loc) -> str:
        names = self.used.get(loc)
        return f" (after expanding {', '.join(f'${{{n}}}' for n in names)})" if names else ""
