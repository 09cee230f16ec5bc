"""The house rules the code itself can check: modules small enough to read in one sitting,
dependencies that point one way (gateway, mcp_server, workers -> workflows, activities -> core),
no two modules that import each other, however long the way round, and no provider's name
tested outside the provider's own modules.

Each rule has an explicit table of exceptions, each with its reason; an exception that is no
longer needed fails too, so the tables only shrink.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

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


# Where a provider's own code lives: its transport (both sides), its guided setup, and the
# providers' configuration sections. Anywhere else a decision about a provider reads what the
# provider declares it can do (`agentcomms.transports.ABILITIES`), never its name.
PROVIDERS_OWN = ("agentcomms/transports/", "agentcomms/setup/", "agentcomms/config/chat.py")
# (module, word) where a provider's name is compared as another thing's word, and why.
NOT_PROVIDER_NAMES: dict[tuple[str, str], str] = {
    ("activities/escalation.py", "sms"): "the ladder's SMS rung, a rung kind like chat and call",
    ("agentcomms/agents/permission_mode.py", "local"): "Claude Code's settings.local.json",
    ("agentcomms/config/voice.py", "local"): "the local phone an approver names, phone:local",
}

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


def _imports_at_import_time(path: Path) -> set[str]:
    """What importing `path` imports: its module-level imports, not those inside a function nor
    those only a type checker reads (`if TYPE_CHECKING:`)."""
    found: set[str] = set()
    todo: list[ast.stmt] = list(ast.parse(path.read_text(), str(path)).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo += node.orelse
        elif isinstance(node, ast.If):
            todo += node.body + node.orelse
        elif isinstance(node, ast.With):  # workflow code imports in `imports_passed_through()`
            todo += node.body
        elif isinstance(node, ast.Try):
            todo += node.body + node.orelse + node.finalbody
            todo += [stmt for handler in node.handlers for stmt in handler.body]
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


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that reach one another through their imports (Tarjan's strongly
    connected components of more than one module), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph.get(module, ())):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while (member := stack.pop()) != module:
                group.append(member)
            if group:
                found.append(sorted([*group, module]))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_cycles_are_found_however_long_the_way_round() -> None:
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},  # a -> b -> c -> a
        "d": set(),
        "e": {"f"},
        "f": {"e"},  # two modules that import each other
        "g": {"g"},  # a module's own name is no cycle
    }
    assert _cycles(graph) == [["a", "b", "c"], ["e", "f"]]


@functools.cache  # read once for both cycle tests
def _import_time_graph() -> tuple[dict[str, set[str]], dict[str, Path]]:
    files = {_module(p): p for p in _product_files()}
    known = set(files)
    graph = {
        module: _first_party(_imports_at_import_time(path), known) - {module}
        for module, path in files.items()
    }
    return graph, files


def _describe(cycles: list[list[str]], graph: dict[str, set[str]]) -> list[str]:
    return [
        " <-> ".join(group)
        + ": "
        + "; ".join(f"{a} imports {b}" for a in group for b in sorted(graph[a]) if b in group)
        for group in cycles
    ]


def test_no_import_cycle() -> None:
    """A cycle makes a module's start depend on the order in which others are first imported,
    and two rooms that import each other are one room: the shared piece belongs further down.
    `from package import module` counts as importing the package too, whose `__init__` runs."""
    graph, _ = _import_time_graph()
    cycles = _cycles(graph)
    described = _describe(cycles, graph)
    assert not cycles, "import cycles (move the shared piece down):\n" + "\n".join(described)


def test_no_import_cycle_between_rooms() -> None:
    """The folders (gateway/agents/, agentcomms/config/…) import one another one way too: a
    piece two rooms share lives in the lower one. A package and the packages inside it are one
    room's parts here."""
    graph, files = _import_time_graph()

    def room(module: str) -> str:
        return module if files[module].name == "__init__.py" else module.rpartition(".")[0]

    def nested(a: str, b: str) -> bool:
        return a.startswith(b + ".") or b.startswith(a + ".")

    rooms: dict[str, set[str]] = {}
    for module, imported in graph.items():
        rooms.setdefault(room(module), set()).update(
            room(other)
            for other in imported
            if room(other) != room(module) and not nested(room(other), room(module))
        )
    cycles = _cycles(rooms)
    described = []
    for group in cycles:
        hops = [
            f"{a} imports {b}"
            for a in sorted(graph)
            for b in sorted(graph[a])
            if room(a) in group
            and room(b) in group
            and room(a) != room(b)
            and not nested(room(a), room(b))
        ]
        described.append(" <-> ".join(group) + ": " + "; ".join(hops))
    assert not cycles, "rooms that import each other:\n" + "\n".join(described)


def _provider_names_in(node: ast.AST, names: tuple[str, ...]) -> list[str]:
    """The provider names `node` is, or holds (a tuple, list or set of names only)."""
    if isinstance(node, ast.Constant) and node.value in names:
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set) and node.elts:
        found = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names]
        return found if len(found) == len(node.elts) else []
    return []


def _provider_names_tested(source: str, names: tuple[str, ...]) -> list[tuple[int, str]]:
    """Where `source` compares with a provider's name (`== "sms"`, `in ("sms", "whatsapp")`)
    or keeps a list of them (`BILLED = ("sms", "whatsapp")`)."""
    found: list[tuple[int, str]] = []
    compared: set[int] = set()  # the sides of a comparison, each counted once
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            compared.update(id(side) for side in sides)
            found += [(node.lineno, n) for side in sides for n in _provider_names_in(side, names)]
        elif isinstance(node, ast.Tuple | ast.List | ast.Set) and id(node) not in compared:
            if len(node.elts) > 1:
                found += [(node.lineno, n) for n in _provider_names_in(node, names)]
    return found


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ('if provider == "sms": pass', [(1, "sms")]),
        ('x = via != "email"', [(1, "email")]),
        ('ok = p in ("telegram", "slack")', [(1, "telegram"), (1, "slack")]),
        ('BILLED = ("sms", "whatsapp")', [(1, "sms"), (1, "whatsapp")]),
        ('ok = p not in {"irc"}', [(1, "irc")]),
        ('s = x == "matrix"', []),  # not a provider
        ('pair = ("sms", "call")', []),  # a list of other things that holds one name
        ('label = {"sms": "SMS"}.get(p)', []),  # a lookup decides nothing
        ('send(provider="sms")', []),
    ],
)
def test_a_provider_name_tested_is_found(source: str, found: list[tuple[int, str]]) -> None:
    names = ("local", "telegram", "slack", "sms", "whatsapp", "email", "irc")
    assert _provider_names_tested(source, names) == found


def test_no_provider_name_is_tested_outside_its_own_modules() -> None:
    from agentcomms.transports import PROVIDERS

    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for path in _product_files():
        name = str(path.relative_to(ROOT))
        if name.startswith(PROVIDERS_OWN):
            continue
        for line, provider in _provider_names_tested(path.read_text(), PROVIDERS):
            if (name, provider) in NOT_PROVIDER_NAMES:
                seen.add((name, provider))
            else:
                problems.append(
                    f"{name}:{line} tests the provider name {provider!r}: declare what it can do "
                    "in its row of agentcomms.transports.ABILITIES and read that instead"
                )
    problems += [
        f"NOT_PROVIDER_NAMES lists {word!r} in {name}, which compares no such word now: drop it"
        for name, word in NOT_PROVIDER_NAMES
        if (name, word) not in seen
    ]
    assert not problems, "\n".join(problems)
