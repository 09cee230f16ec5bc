"""Session-scoped Temporal environments (filled in by the foundation work)."""
