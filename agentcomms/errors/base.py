"""The root of the errors a user can fix, and those of the deployment itself: its configuration,
its start-up, Temporal and the payload codec."""

from __future__ import annotations


class AgentcommsError(Exception):
    """A problem the user can act on; its message says what was wrong and what to do."""


class ConfigError(AgentcommsError):
    """The configuration file or an override is unreadable, malformed or unsafe."""


class StoppedDuringStartup(AgentcommsError):
    """Ctrl-C or SIGTERM arrived before start-up finished; what had started was stopped."""


class TemporalUnavailable(AgentcommsError):
    """No Temporal server answers and none could be started."""


class SearchAttributesMissing(AgentcommsError):
    """The namespace lacks agentcomms' search attributes and refused to add them."""


class PayloadDecryptionError(ValueError):
    """A payload cannot be opened: its key is not configured, or it was altered."""
