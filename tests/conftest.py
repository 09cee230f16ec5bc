"""Fixtures every test module may ask for, registered from ``tests/support``, where each area's
fixtures live beside its helpers: the session's Temporal servers, a private agentcomms home, a
private tmux server, real databases, a whole stack, a module's browser, and the fakes of
providers that more than one test module speaks to.
"""

import os
import sys

import pytest

# pytest-xdist's workers run with COLUMNS=80, and the CLI's rich console, made when its module is
# first imported, keeps a width it finds then: the CLI's tests set their own width per command.
os.environ.pop("COLUMNS", None)

# Before the plugins below import them: a failed assert inside a helper shows its values too.
pytest.register_assert_rewrite("tests.support")

pytest_plugins = [
    "tests.support.temporal",
    "tests.support.databases",
    "tests.support.home",
    "tests.support.tmux",
    "tests.support.stack",
    "tests.support.voice",
    "tests.support.chat",
    "tests.support.agents",
    "tests.support.browser",
]
# The leak hunt: each thing left open fails the test that left it (tests/support/leaks.py).
if os.environ.get("AGENTCOMMS_LEAK_HUNT"):
    pytest_plugins.append("tests.support.leaks")

# What a test starts, read from the fixtures it uses (with everything they use in turn), so a
# quick run between commits can leave the slow ones out: `pytest -m "not agents and not browser"`.
_STARTED_BY = {
    "agents": {"agent_clis"},  # real Claude Code, Codex or Gemini CLI in a pane
    "browser": {"browser"},  # Debian's chromium, driven by Playwright
    "stack": {"stack"},  # a whole deployment: workers and a gateway
    "temporal": {"temporal_env", "temporal_env_low_can", "time_skipping_env"},
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in _STARTED_BY.items():
            if used & fixtures:
                item.add_marker(marker)
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("database_url") == "postgresql":
            item.add_marker("postgres")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _without_beartypes_import_hook()


def _without_beartypes_import_hook() -> None:
    """fastmcp's key-value store (py-key-value-aio) puts beartype's import hook in front of every
    later import in the process, of any package. Temporal's workflow sandbox imports a workflow's
    modules afresh for each run it starts, and through that hook each cost 0.2 s instead of
    0.015 s (measured): once a test had imported fastmcp, every stack after it started about 1 s
    slower and every workflow run cost more. No process of a deployment has both (the MCP server
    runs no worker), so the tests take the hook out; the modules it checked stay checked."""
    hooks = [hook for hook in sys.path_hooks if not _is_beartypes(hook)]
    if len(hooks) != len(sys.path_hooks):
        sys.path_hooks[:] = hooks
        sys.path_importer_cache.clear()  # finders made through the hook would keep using it


def _is_beartypes(hook: object) -> bool:
    cells = getattr(hook, "__closure__", None) or ()
    return any("beartype" in repr(cell.cell_contents) for cell in cells)
