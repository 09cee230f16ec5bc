"""``AGENTCOMMS_<SECTION>__<KEY>`` environment overrides (and the older ``AGENTCALL_*`` names).

A variable overrides one key of the file; a string key takes the text as is, any other key parses
it as JSON when it can. Names that look like overrides but are not get a hint.
"""

from __future__ import annotations

import json
import os
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from agentcomms.config.keys import Loc, annotation_at

ENV_PREFIX = "AGENTCOMMS_"
LEGACY_ENV_PREFIX = "AGENTCALL_"  # the older names; read, but AGENTCOMMS_* wins


def env_overrides(
    environ: Mapping[str, str] | None = None, *, only: Sequence[Loc] | None = None
) -> list[tuple[str, tuple[str, ...], str]]:
    """The variables that override keys, as ``(name, key path, raw value)``, in applying order.

    ``AGENTCOMMS_TEMPORAL__ADDRESS`` sets ``temporal.address``: the part after the prefix is split
    on ``__`` and lower-cased. Only names whose first part is a top-level section of
    :class:`Config` count, so ``AGENTCOMMS_HOME``, ``AGENTCOMMS_AGENT_ID`` or
    ``AGENTCOMMS_TEST_DATABASE_URL`` (which configure other things) are never mistaken for keys.
    ``AGENTCALL_*`` names are applied first, so ``AGENTCOMMS_*`` wins; within each, shallower
    keys first, so ``…_CHAT__TELEGRAM='{"enabled": true}'`` and ``…_CHAT__TELEGRAM__TOKEN`` combine.
    With ``only``, just the variables that set one of those key paths, a part of one, or a key
    inside one (and the schema is not loaded).
    """
    environ = os.environ if environ is None else environ
    counts = _sections() if only is None else _within(only)
    found: list[tuple[int, int, str, tuple[str, ...], str]] = []
    for name, raw in environ.items():
        for rank, prefix in enumerate((LEGACY_ENV_PREFIX, ENV_PREFIX)):
            if not name.startswith(prefix):
                continue
            parts = tuple(name[len(prefix) :].lower().split("__"))
            if all(parts) and counts(parts):
                found.append((rank, len(parts), name, parts, raw))
    found.sort()
    return [(name, parts, raw) for _, _, name, parts, raw in found]


def _sections() -> Callable[[tuple[str, ...]], bool]:
    from agentcomms.config.models import Config

    return lambda parts: parts[0] in Config.model_fields


def _within(only: Sequence[Loc]) -> Callable[[tuple[str, ...]], bool]:
    wanted = [tuple(str(p).lower() for p in loc) for loc in only]

    def counts(parts: tuple[str, ...]) -> bool:
        return any(parts[: len(w)] == w or w[: len(parts)] == parts for w in wanted)

    return counts


def env_override_hints(environ: Mapping[str, str] | None = None) -> list[str]:
    """Variables that look like overrides but are ignored, with the name that was probably meant."""
    from agentcomms.config.models import Config

    environ = os.environ if environ is None else environ
    hints = []
    for name in sorted(environ):
        for prefix in (ENV_PREFIX, LEGACY_ENV_PREFIX):
            rest = name[len(prefix) :] if name.startswith(prefix) else ""
            first = rest.lower().split("__")[0]
            section = next((s for s in Config.model_fields if first.startswith(s + "_")), None)
            if section:
                meant = f"{prefix}{section.upper()}__{rest[len(section) + 1 :]}"
                hints.append(
                    f"{name} is ignored: keys are separated by a double underscore, as in {meant}"
                )
    return hints


def apply_env_overrides(
    data: dict[str, Any],
    environ: Mapping[str, str],
    *,
    only: Sequence[Loc] | None = None,
    annotation: Callable[[Loc], Any] = annotation_at,
) -> dict[Loc, str]:
    """Set each overridden key in ``data`` (in place); return key path -> variable that set it.

    ``only`` and ``annotation`` narrow it to some key paths, whose declared types the caller
    knows (see :func:`env_overrides`).
    """
    applied: dict[Loc, str] = {}
    for name, parts, raw in env_overrides(environ, only=only):
        target: dict[str, Any] = data
        loc: Loc = ()
        for part in parts[:-1]:
            key = _match_key(target, part)
            if not isinstance(target.get(key), dict):
                target[key] = {}
            target, loc = target[key], (*loc, key)
        key = _match_key(target, parts[-1])
        loc = (*loc, key)
        target[key] = _env_value(raw, annotation(loc))
        applied = {k: v for k, v in applied.items() if k[: len(loc)] != loc}
        applied[loc] = name
    return applied


def _match_key(obj: dict[str, Any], part: str) -> str:
    # Variable names are upper case; an agent id in the file may not be.
    if part in obj:
        return part
    return next((k for k in obj if k.lower() == part), part)


def _env_value(raw: str, annotation: Any) -> Any:
    """A string key takes the text as is (so 007 stays "007"); others parse it as JSON if they can."""
    if _is_text(annotation):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _is_text(annotation: Any) -> bool:
    if annotation in (str, Path):
        return True
    if typing.get_origin(annotation) is Literal:
        return all(isinstance(a, str) for a in typing.get_args(annotation))
    if isinstance(annotation, type) and annotation.__module__.startswith("pydantic"):
        from pydantic import SecretStr  # already loaded with the schema that named it

        return annotation is SecretStr
    return False
