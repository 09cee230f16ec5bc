"""Key paths: how a place in the configuration is named, shown and typed.

A key path is a tuple such as ``("agents", "backend", "target")``; it is shown as
``agents.backend.target`` and its declared type is read from :class:`Config` (imported only by
:func:`annotation_at`, so naming and walking keys costs no pydantic).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from typing import Any

Loc = tuple[str | int, ...]


def dotted(loc: Loc) -> str:
    """``("agents", "x", "tags", 0)`` -> ``agents.x.tags[0]``; the empty path is ``(top level)``."""
    out = ""
    for part in loc:
        if part == "[key]":  # pydantic's marker for "the key itself", already named
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "(top level)"


def annotation_at(loc: Loc) -> Any:
    """The declared type at a key path, or None where the path leaves the schema."""
    # The schema is imported here, not above: reading the file's keys needs no pydantic.
    from pydantic import BaseModel

    from agentcomms.config.models import Config

    annotation: Any = Config
    for part in loc:
        annotation = unwrap_optional(annotation)
        origin = typing.get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            info = annotation.model_fields.get(part) if isinstance(part, str) else None
            if info is None:
                return None
            annotation = info.annotation
        elif origin is dict:
            annotation = typing.get_args(annotation)[1]
        elif origin is list:
            annotation = typing.get_args(annotation)[0]
        else:
            return None
    return unwrap_optional(annotation)


def key_paths(value: Any, loc: Loc = ()) -> Iterator[Loc]:
    """Every key path in nested JSON data, parents before children."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield (*loc, k)
            yield from key_paths(v, (*loc, k))


def unwrap_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation
