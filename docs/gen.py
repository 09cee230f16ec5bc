"""Write the manual's generated references from the code: the CLI (the typer app), the
configuration (the pydantic models of ``agentcomms/config``), the MCP tools (their schemas, as
an MCP client lists them) and the socket's methods (their declarations).

    .venv/bin/python docs/gen.py          # write docs/reference/{cli,configuration,mcp-tools,socket}.md
    .venv/bin/python docs/gen.py --check  # exit 1, naming each page that is stale

A page is written only from what the code declares, so the same code gives the same page on any
machine (no default read from this machine's home or host name).
"""

from __future__ import annotations

import asyncio
import json
import sys
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr

DOCS = Path(__file__).resolve().parent
REGENERATE = ".venv/bin/python docs/gen.py"
NOTICE = f"<!-- Generated from the code by docs/gen.py; do not edit. Regenerate: {REGENERATE} -->"


def _prose(text: str) -> str:
    """Help text as Markdown shows it: outside `code`, a `<home>` is not an HTML tag and a `*`
    starts no emphasis."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")
    return "`".join(parts)


def _cell(text: str) -> str:
    """Text that stays inside one cell of a Markdown table."""
    return _prose(" ".join(text.split())).replace("|", "\\|")


def _table(head: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# --- the CLI ---------------------------------------------------------------------------------


def cli_page() -> str:
    import typer

    from agentcomms.cli.typer_app import app

    root = typer.main.get_command(app)
    parts = [
        NOTICE,
        "# CLI reference",
        _cell(root.help or ""),
        "Every command also takes `--help`.",
    ]
    ctx = root.context_class(root, info_name="agentcomms")
    parts += _cli_commands(root, ctx, "agentcomms")
    return "\n\n".join(parts) + "\n"


def _cli_commands(group: Any, parent: Any, path: str) -> list[str]:
    parts: list[str] = []
    for name in sorted(group.commands):
        command = group.commands[name]
        if command.hidden:
            continue
        ctx = command.context_class(command, info_name=name, parent=parent)
        parts.append(_cli_command(command, ctx, f"{path} {name}"))
        if hasattr(command, "commands"):
            parts += _cli_commands(command, ctx, f"{path} {name}")
    return parts


def _cli_command(command: Any, ctx: Any, path: str) -> str:
    usage, rows = [path], []
    for param in command.params:
        if getattr(param, "hidden", False) or param.name == "help":
            continue
        if param.param_type_name == "argument":
            name = param.name.upper() + ("…" if param.nargs == -1 else "")
            usage.append(name if param.required else f"[{name}]")
            rows.append(
                (f"`{name}`", (param.help or "") + ("" if param.required else " (optional)"))
            )
        else:
            record = param.get_help_record(ctx)
            if record is not None:
                rows.append((f"`{record[0]}`", record[1]))
    if any(param.param_type_name == "option" for param in command.params):
        usage.insert(1, "[OPTIONS]")
    if hasattr(command, "commands"):
        usage.append("COMMAND [ARGS]…")
    parts = [
        f"## `{path}`",
        "```\n" + " ".join(usage) + "\n```",
        _prose((command.help or "").strip()),
    ]
    if rows:
        parts.append(_table(("argument or option", "what it does"), rows))
    return "\n\n".join(p for p in parts if p)


# --- the configuration -----------------------------------------------------------------------


def config_page() -> str:
    from agentcomms.config.models import Config

    parts = [
        NOTICE,
        "# Configuration reference",
        "Every key of `~/.agentcomms/config.json`, section by section, as `config validate` checks "
        "it. Every section refuses keys it does not know; `${VAR}` and `${VAR:-default}` are "
        "expanded in string values, and `AGENTCOMMS_SECTION__KEY` overrides a key (see "
        "[Configuration](../configuration.md)). A *secret* is never printed by `config show`.",
    ]
    parts += _config_sections(Config, "")
    return "\n\n".join(parts) + "\n"


def _config_sections(model: type[BaseModel], path: str, about: str | None = None) -> list[str]:
    rows, nested = [], []
    for name, field in model.model_fields.items():
        key = field.alias or name
        inner = _model_in(field.annotation)
        if inner is not None:
            model_type, suffix = inner
            where = f"{path}.{key}{suffix}" if path else key + suffix
            nested += _config_sections(model_type, where, field.description)
            continue
        default = (
            "required"
            if field.is_required()
            else _json(field.get_default(call_default_factory=True))
        )
        rows.append(
            (f"`{key}`", _kind(field.annotation, field.metadata), default, field.description or "")
        )
    parts = [f"## `{path}`"] if path else []
    doc = (model.__doc__ or "").strip() if model.__doc__ != BaseModel.__doc__ else ""
    parts += [_prose(" ".join(text.split())) for text in (doc, about) if text and path]
    if rows:
        parts.append(_table(("key", "type", "default", "what it is"), rows))
    return (["\n\n".join(parts)] if rows else []) + nested


def _model_in(annotation: Any) -> tuple[type[BaseModel], str] | None:
    """The section model a key holds (directly, optionally, as a list or a map), with the suffix
    its keys are written under: ``agents.<id>``, ``escalation[]``."""
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, ""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list and args:
        found = _model_in(args[0])
        return (found[0], "[]") if found else None
    if origin is dict and len(args) == 2:
        found = _model_in(args[1])
        return (found[0], ".<id>") if found else None
    return None


def _unwrap(annotation: Any) -> Any:
    """`X` of `Annotated[X, …]` and of `X | None`."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kept = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(kept) == 1:
            return _unwrap(kept[0])
    return annotation


def _kind(annotation: Any, metadata: list[Any] = []) -> str:  # noqa: B006 - never mutated
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _kind(args[0], list(args[1:]))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_kind(a) for a in args)
    if origin is typing.Literal:
        return " or ".join(json.dumps(a) for a in args)
    if origin is list:
        return f"list of {_kind(args[0])}"
    if origin is dict:
        return f"map of {_kind(args[0])} to {_kind(args[1])}"
    names = {type(None): "null", str: "string", int: "integer", float: "number", bool: "boolean"}
    name = names.get(annotation) or {Path: "path", SecretStr: "secret"}.get(annotation, "")
    name = name or getattr(annotation, "__name__", str(annotation))
    bounds = [
        f"{sign} {getattr(m, attr)}"
        for m in metadata
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))
        if getattr(m, attr, None) is not None
    ]
    return f"{name} ({', '.join(bounds)})" if bounds else name


def _json(value: Any) -> str:
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", by_alias=True)
    return f"`{json.dumps(value, ensure_ascii=False)}`"


# --- the MCP tools ---------------------------------------------------------------------------


def mcp_page() -> str:
    tools = asyncio.run(_list_tools())
    parts = [
        NOTICE,
        "# MCP tools reference",
        "The tools `agentcomms mcp` serves, with their parameters and what they return, as an "
        "MCP client lists them. `agent_id`, where a tool takes it, defaults to the agent the "
        "server was started for (see [MCP](../agents/mcp.md)).",
    ]
    for tool in sorted(tools, key=lambda t: t.name):
        parts.append(f"## `{tool.name}`")
        parts.append(_prose((tool.description or "").strip()))
        parts.append(_schema_table(tool.input_schema, "parameter") or "No parameters.")
        result = _schema_table(tool.output_schema or {}, "result field")
        if result:
            parts.append("Returns:\n\n" + result)
    return "\n\n".join(p for p in parts if p) + "\n"


async def _list_tools() -> list[Any]:
    from fastmcp import Client

    from mcp_server.server import build_server

    # Listing tools asks the gateway nothing, so the socket need not exist.
    server = build_server(Path("/nonexistent/daemon.sock"), default_agent="default")
    async with Client(server) as client:
        return list(await client.list_tools())


def _schema_table(schema: dict[str, Any], what: str) -> str:
    """A table of a tool's parameters (with their defaults) or of its result's fields (with
    whether each is always there)."""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    rows = []
    for name, prop in properties.items():
        if what == "parameter":
            default = "required" if name in required else _json(prop.get("default"))
        else:
            default = "always" if name in required else "when it applies"
        rows.append((f"`{name}`", _schema_kind(prop), default, str(prop.get("description", ""))))
    head = (what, "type", "default" if what == "parameter" else "present", "what it is")
    return _table(head, rows) if rows else ""


def _schema_kind(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    if "enum" in prop:
        return " or ".join(json.dumps(v) for v in prop["enum"])
    for union in ("anyOf", "oneOf"):
        if union in prop:
            return " or ".join(_schema_kind(p) for p in prop[union])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_schema_kind(prop.get('items', {}))}"
    bounds = [f"{sign} {prop[k]}" for k, sign in (("minimum", "≥"), ("maximum", "≤")) if k in prop]
    return f"{kind} ({', '.join(bounds)})" if bounds else str(kind)


# --- the socket's methods --------------------------------------------------------------------


def socket_page() -> str:
    from gateway.service import SOCKET_ROOMS
    from gateway.socket.declare import declared_in

    methods = sorted((m for room in SOCKET_ROOMS for m in declared_in(room)), key=lambda m: m.name)
    parts = [
        NOTICE,
        "# Socket methods reference",
        "The methods the gateway serves on its socket (`~/.agentcomms/daemon.sock`, owner-only; "
        "one JSON-RPC 2.0 request per line, one answer per line), from their declarations "
        "(`@declare(who)` in `gateway/`). The CLI, the hooks and the MCP server call these. "
        "*Who* is checked before a method runs: a request acting for an agent carries the "
        "agent's token, and what decides for the human is refused to any process in an agent's "
        "pane (see [Security](../security.md)).",
        _table(
            ("method", "who may call it", "what it does"),
            [(f"[`{m.name}`](#{m.name})", str(m.who), m.summary) for m in methods],
        ),
    ]
    for m in methods:
        parts.append(f"## `{m.name}`")
        parts.append(_prose(m.summary))
        parts.append(f"Who: {_prose(str(m.who))}. Returns: `{_type_name(m.result)}`.")
        rows = [
            (
                f"`{name}`",
                _kind(field.annotation, field.metadata),
                "required"
                if field.is_required()
                else _json(field.get_default(call_default_factory=True)),
                field.description or "",
            )
            for name, field in m.params.model_fields.items()
        ]
        parts.append(
            _table(("param", "type", "default", "what it is"), rows) if rows else "No params."
        )
    return "\n\n".join(p for p in parts if p) + "\n"


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


# --- writing and checking --------------------------------------------------------------------

PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page,
    "reference/configuration.md": config_page,
    "reference/mcp-tools.md": mcp_page,
    "reference/socket.md": socket_page,
}


def stale_pages() -> list[str]:
    """The generated pages whose committed text differs from what the code gives now."""
    stale = []
    for name, make in PAGES.items():
        path = DOCS / name
        if not path.exists() or path.read_text() != make():
            stale.append(f"docs/{name}")
    return stale


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        print(f"usage: {REGENERATE} [--check]", file=sys.stderr)
        return 2
    if argv == ["--check"]:
        stale = stale_pages()
        for name in stale:
            print(f"{name} is stale: regenerate it with `{REGENERATE}`", file=sys.stderr)
        return 1 if stale else 0
    for name, make in PAGES.items():
        (DOCS / name).parent.mkdir(parents=True, exist_ok=True)
        (DOCS / name).write_text(make())
        print(f"wrote docs/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
