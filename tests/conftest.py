"""Fixtures every test module may ask for, registered from ``tests/support``, where each area's
fixtures live beside its helpers: the session's Temporal servers, a private agentcomms home, a
private tmux server, real databases, a whole stack, a module's browser, and the fakes of
providers that more than one test module speaks to.
"""

import pytest

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
