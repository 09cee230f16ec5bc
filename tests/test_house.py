"""The house rules the code itself can check: modules small enough to read in one sitting, and
dependencies that point one way (gateway, mcp_server, workers -> workflows, activities -> core).

Each rule has an explicit table of exceptions, each with its reason; an exception that is no
longer needed fails too, so the tables only shrink.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("agentcomms", "workflows", "activities", "gateway", "workers", "mcp_server")
MAX_LINES = 500

# Product modules allowed past MAX_LINES, and why.
LONG_MODULES: dict[str, str] = {}

# What workflow code may import besides the standard library, temporalio, pydantic and its own
# package: modules of data and constants only, passed through the sandbox.
PASS_THROUGH = (
    "agentcomms.approval_models",
    "agentcomms.escalation_models",
    "agentcomms.agents.state",  # the agent's state machine: pydantic and plain Python
    "agentcomms.errors",  # and its area modules, but not agentcomms.errors.mcp (fastmcp)
    "agentcomms.framing",
    "agentcomms.limits",
    "agentcomms.models",
    "agentcomms.outbox_models",
    "agentcomms.policies",
    "agentcomms.search_attributes",
    "agentcomms.workflow_ids",
    "agentcomms.voice.models",
)
THIRD_PARTY_FOR_WORKFLOWS = ("temporalio", "pydantic")
# Workflow code any workflow package may import besides its own: declarations of the activities
# more than one workflow runs, each declared once; the escalation ladder, which a request climbs
# inside its own workflow; and the call, which a ladder places as a child workflow (by reference).
SHARED_WORKFLOW_CODE = ("workflows.activities", "workflows.escalation.ladder", "workflows.call")


def _is_client(module: str) -> bool:
    """A workflow's client (how everyone else starts, signals and asks it) lives beside it but is
    not workflow code: it may use the core's I/O, and no workflow module may import it."""
    return module == "workflows.updates" or (
        _within(module, ("workflows",)) and module.endswith(".client")
    )


# (importer, imported) pairs that break a rule below for now, and why.
ALLOWED_IMPORTS: dict[tuple[str, str], str] = {}


def _product_files() -> Iterator[Path]:
    for top in PRODUCT:
        yield from sorted((ROOT / top).rglob("*.py"))


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, at the top or inside a function (`from a import b` counts
    as a and as a.b: b may be a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _first_party(modules: set[str], known: set[str]) -> set[str]:
    """The product modules among `modules` (a name that is an attribute counts as its module)."""
    resolved = set()
    for name in modules:
        if name.split(".")[0] not in PRODUCT:
            continue
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name:
            resolved.add(name)
    return resolved


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _graph() -> dict[str, tuple[set[str], set[str]]]:
    """Each product module: (every module it imports, the product modules among them)."""
    files = {_module(p): p for p in _product_files()}
    known = set(files)
    graph = {}
    for module, path in files.items():
        imported = _imports(path)
        graph[module] = (imported, _first_party(imported, known) - {module})
    return graph


def _broken(rule: str, pairs: list[tuple[str, str]], seen: set[tuple[str, str]]) -> list[str]:
    seen.update(p for p in pairs if p in ALLOWED_IMPORTS)
    return [f"{rule}: {a} imports {b}" for a, b in pairs if (a, b) not in ALLOWED_IMPORTS]


def test_product_modules_stay_readable_in_one_sitting() -> None:
    lengths = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines()) for path in _product_files()
    }
    too_long = [
        f"{name}: {lines} lines (over {MAX_LINES}; split it by concern)"
        for name, lines in sorted(lengths.items())
        if lines > MAX_LINES and name not in LONG_MODULES
    ]
    stale = [
        f"{name} is listed in LONG_MODULES but has {lengths.get(name, 0)} lines: drop it there"
        for name in LONG_MODULES
        if lengths.get(name, 0) <= MAX_LINES
    ]
    assert not too_long + stale, "\n".join(too_long + stale)


def test_dependencies_point_one_way() -> None:
    graph = _graph()
    seen: set[tuple[str, str]] = set()
    problems: list[str] = []
    upper = ("workflows", "activities", "gateway", "workers", "mcp_server")
    # The CLI is an entry point, like the gateway: it may start and ask anything.
    core = [m for m in graph if _within(m, ("agentcomms",)) and not _within(m, ("agentcomms.cli",))]
    problems += _broken(
        "core depends on no workflow, activity or server",
        [(m, i) for m in core for i in sorted(graph[m][1]) if _within(i, upper)],
        seen,
    )
    activities = [m for m in graph if _within(m, ("activities",))]
    problems += _broken(
        "activities depend on core only",
        [
            (m, i)
            for m in activities
            for i in sorted(graph[m][1])
            if _within(i, ("workflows", "gateway", "workers", "mcp_server"))
        ],
        seen,
    )
    store = [m for m in graph if _within(m, ("agentcomms.store",))]
    problems += _broken(
        "the store knows nothing of voice",
        [(m, i) for m in store for i in sorted(graph[m][1]) if _within(i, ("agentcomms.voice",))],
        seen,
    )
    clients = [m for m in graph if _is_client(m)]
    problems += _broken(
        "a workflow's client depends on core and workflows only",
        [
            (m, i)
            for m in clients
            for i in sorted(graph[m][1])
            if _within(i, ("activities", "gateway", "workers", "mcp_server"))
        ],
        seen,
    )
    problems += _workflow_imports(graph, seen)
    stale = [
        f"ALLOWED_IMPORTS lists {a} -> {b}, which breaks no rule now: drop it there"
        for a, b in ALLOWED_IMPORTS
        if (a, b) not in seen
    ]
    assert not problems + stale, "\n".join(problems + stale)


def _workflow_imports(
    graph: dict[str, tuple[set[str], set[str]]], seen: set[tuple[str, str]]
) -> list[str]:
    """Workflow code imports the standard library, temporalio, pydantic, its own package and
    the pass-through modules, which themselves import no more than that."""
    pure = [m for m in graph if _within(m, PASS_THROUGH) and m != "agentcomms.errors.mcp"]
    pairs: list[tuple[str, str]] = []
    for module, (imported, first_party) in graph.items():
        if not (_within(module, ("workflows",)) or module in pure) or _is_client(module):
            continue
        # A workflow package's modules (workflows/call/) import each other.
        own = ".".join(module.split(".")[:2]) if _within(module, ("workflows",)) else module
        for name in sorted(imported):
            top = name.split(".")[0]
            if top in PRODUCT or top in sys.stdlib_module_names or top == "__future__":
                continue
            if top not in THIRD_PARTY_FOR_WORKFLOWS:
                pairs.append((module, name))
        for name in sorted(first_party):
            if _is_client(name):
                pairs.append((module, name))
            elif not (
                name in pure
                or name in SHARED_WORKFLOW_CODE
                or _within(name, (own,))
                or name == "agentcomms"
            ):
                pairs.append((module, name))
    return _broken("workflows import only pass-through modules", pairs, seen)
