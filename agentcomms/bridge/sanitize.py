"""Making untrusted text safe to type into a terminal, within a size cap.

What a terminal could obey is stripped by :func:`agentcomms.framing.strip_unsafe` (escape
sequences, controls, bidi overrides, lone surrogates; CRLF and CR become LF). Tabs are kept; the
tmux adapter pastes text that has them so they do not act as a Tab key press where bracketed
paste is on. Trailing newlines are dropped: the submit is a separate Enter.

Over the size cap the text is cut and ends with a visible marker, ``… [truncated 1234 chars]``,
never silently; the result including the marker fits in the cap (a cap shorter than the marker
itself yields just the marker).
"""

from __future__ import annotations

from dataclasses import dataclass

from agentcomms.framing import strip_unsafe

TRUNCATION_MARKER = "… [truncated {removed} chars]"


@dataclass(frozen=True)
class CleanText:
    """Text that is safe to type, and whether the size cap cut it."""

    text: str
    truncated: bool = False
    removed: int = 0  # characters cut by the cap (not those stripped as unsafe)


def truncate(text: str, max_chars: int) -> CleanText:
    """Cut `text` to at most `max_chars` characters, ending with the truncation marker."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, not {max_chars}")
    if len(text) <= max_chars:
        return CleanText(text)
    # The marker's length depends on the count it shows, so settle the count first; it grows by a
    # digit at most once, so this takes two or three rounds.
    removed = len(text) - max_chars
    while True:
        keep = max(max_chars - len(TRUNCATION_MARKER.format(removed=removed)), 0)
        if len(text) - keep == removed:
            break
        removed = len(text) - keep
    return CleanText(
        text[:keep] + TRUNCATION_MARKER.format(removed=removed), truncated=True, removed=removed
    )


def sanitize(text: str, *, max_chars: int) -> CleanText:
    """Make untrusted `text` safe to type: strip what a terminal would obey, then cap its size."""
    return truncate(strip_unsafe(text).rstrip("\n"), max_chars)
