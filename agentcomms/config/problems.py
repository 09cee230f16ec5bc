"""Describing a validation error in one line: the key, what was expected, and never a secret."""

from __future__ import annotations

import difflib
import json
import typing
from typing import Any

from pydantic import BaseModel, SecretStr

from agentcomms.config.keys import Loc, annotation_at, unwrap_optional
from agentcomms.config.redact import is_secret_key, mask_url_password

_EXPECTED = {
    "int_parsing": "expected an integer",
    "int_type": "expected an integer",
    "int_from_float": "expected an integer",
    "float_parsing": "expected a number",
    "float_type": "expected a number",
    "bool_parsing": "expected true or false",
    "bool_type": "expected true or false",
    "string_type": "expected a string",
    "path_type": "expected a path (a string)",
    "model_type": "expected an object {...}",
    "model_attributes_type": "expected an object {...}",
    "dict_type": "expected an object {...}",
    "list_type": "expected a list [...]",
}
_BOUNDS = {
    "greater_than_equal": ">=",
    "less_than_equal": "<=",
    "greater_than": ">",
    "less_than": "<",
}


def describe(err: Any, loc: Loc) -> str:
    """One pydantic error at ``loc`` as "expected …, got …" (a secret's value is hidden)."""
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "extra_forbidden":
        return "unknown key" + _suggest(loc)
    if kind == "missing":
        return "required key is missing"
    if kind == "value_error":  # our validators' own sentences name the value already
        return str(err["msg"]).removeprefix("Value error, ")
    if kind in _EXPECTED:
        expected = _EXPECTED[kind]
    elif kind == "literal_error":
        expected = f"expected {ctx['expected']}"
    elif kind in _BOUNDS:
        bound = next(iter(ctx.values()), "?")
        expected = f"expected a number {_BOUNDS[kind]} {bound}"
    else:
        msg: str = err["msg"]
        expected = msg[:1].lower() + msg[1:]
    annotation = annotation_at(loc)
    secret = (
        any(isinstance(p, str) and is_secret_key(p) for p in loc)
        or annotation is SecretStr
        # Text where a list or an object holding a secret belongs is most likely that secret.
        or (isinstance(err.get("input"), str) and _holds_secret(annotation))
    )
    return f"{expected}, got {_show_input(err.get('input'), secret=secret)}"


def _holds_secret(annotation: Any) -> bool:
    """Whether what belongs here is a secret, or a list or an object holding one itself, such
    as ``"encryption_keys": ["<the key>"]`` or ``"telegram": "<the bot's token>"`` written."""
    annotation = unwrap_optional(annotation)
    if typing.get_origin(annotation) in (list, dict):
        return _holds_secret(typing.get_args(annotation)[-1])
    if annotation is SecretStr:
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return any(
            unwrap_optional(info.annotation) is SecretStr or is_secret_key(name)
            for name, info in annotation.model_fields.items()
        )
    return False


def json_kind(value: Any) -> str:
    """What sort of JSON value this is, with its article: ``a string``, ``null``…"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _suggest(loc: Loc) -> str:
    parent = annotation_at(loc[:-1])
    if not (isinstance(parent, type) and issubclass(parent, BaseModel)):
        return ""
    # A key spelt differently from its field (quiet_hours' "from") is known by its spelling.
    known = [info.alias or name for name, info in parent.model_fields.items()]
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else f" (known keys: {', '.join(known)})"


def _show_input(value: Any, *, secret: bool) -> str:
    if secret:
        return f"{json_kind(value)} (value hidden)"
    if isinstance(value, str):
        text = json.dumps(mask_url_password(value), ensure_ascii=False)
        return text if len(text) <= 60 else text[:56] + '..."'
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    return json_kind(value)
