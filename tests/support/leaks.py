"""The leak hunt: ``AGENTCOMMS_LEAK_HUNT=1 pytest``.

Something a test leaves open (a subprocess still running, a pipe, a database connection) is
reported by Python only when the collector reaches it, in whatever test runs then. The suite's
own runs report those as warnings, since the test they surface in is not the one to blame. This
plugin collects garbage after every test, inside its teardown, so each leak surfaces in the test
that left it, and makes it an error there.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("filterwarnings", "error::pytest.PytestUnraisableExceptionWarning")


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    # Last among the wrappers, so inside pytest's own: what the collection finds is reported
    # as this test's.
    yield
    gc.collect()
