"""What installing agentcomms into an agent's own configuration raises."""

from __future__ import annotations

from agentcomms.errors.base import AgentcommsError


class AgentConfigError(AgentcommsError):
    """An agent's configuration file cannot be merged into (unreadable, not JSON or TOML, or a
    key of an unexpected shape); the message names the file and the line, and nothing changed."""
