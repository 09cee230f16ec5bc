"""Limits every door agrees on, in a module of constants only (the CLI's quick commands read them
without loading the models)."""

from __future__ import annotations

# The longest message accepted from anyone (socket, MCP tool, CLI stdin); the pane's own cap
# (`max_chars` of a registration) may cut it further, with a visible marker.
MAX_MESSAGE_CHARS = 100_000

# An interrupt is pressed only this soon after it was sent (the mailbox's queue keeps the rule):
# later, it would stop whatever the agent does then, not what the human saw it doing.
INTERRUPT_LIFETIME_S = 60
