"""What an agent reads in its pane: untrusted text made safe, and who wrote it.

Text from chat providers, phones and other agents reaches a terminal program as keystrokes, so
:func:`strip_unsafe` removes anything the terminal or the program could read as a command:

- whole escape sequences (CSI ``ESC [ … final``, OSC/DCS/SOS/PM/APC strings up to BEL or ST,
  SS2/SS3, and two-byte ``ESC x`` forms, plus their 8-bit C1 spellings), not just the ESC byte, so
  ``\\x1b[31mred\\x1b[0m`` becomes ``red`` rather than ``[31mred[0m``;
- the C0 controls other than ``\\n`` and ``\\t``, DEL and the C1 controls (U+0080 to U+009F);
- the bidi embeddings, overrides and isolates (U+202A to U+202E, U+2066 to U+2069): they make what a human
  sees differ from what the agent reads ("Trojan Source", CVE-2021-42574). The plain marks LRM, RLM
  and ALM are kept; right-to-left text needs them and they cannot reorder anything;
- lone surrogates, which cannot be encoded as UTF-8 at all.

CRLF and lone CR become LF (a CR typed into a pane is the Enter key). Tabs are kept. Everything
else (any Unicode, quotes, ``$``, backticks, backslashes) is kept exactly.

:func:`pane_text` is the line the agent reads: the sender's prefix, then the text. The size cap
and the typing itself are the tmux bridge's (``agentcomms.bridge.sanitize``). Pure functions of
the standard library: workflows import this module.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentcomms.models import Event

# Order matters: the specific introducers must win over the generic two-byte ESC form, which would
# otherwise take "ESC [" alone and leave the parameters behind as text.
_ESCAPE_SEQUENCE = re.compile(
    # OSC, DCS, SOS, PM, APC: a string up to BEL or ST (ESC \ or 0x9C). An unterminated one ends at
    # the line's end, so a stray introducer cannot swallow the rest of a message.
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    # CSI: parameters, intermediates, final byte (missing when the sequence is cut short).
    r"|(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    # SS2 / SS3 select one character from another set: that character goes too.
    r"|\x1b[NO][^\n]?"
    # Everything else: ESC, intermediates, final (ESC ( B, ESC 7, ESC c…) or a lone ESC.
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"
)
_UNSAFE_CHARACTER = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_LINE_BREAK = re.compile(r"\r\n?")

# A sender's display name in the pane's "[telegram:456 from Alice]" prefix is cut to this.
SENDER_NAME_MAX = 64


def strip_unsafe(text: str) -> str:
    """Remove escape sequences and control characters; normalise line breaks to LF."""
    text = _LINE_BREAK.sub("\n", text)
    text = _ESCAPE_SEQUENCE.sub("", text)
    return _UNSAFE_CHARACTER.sub("", text)


def pane_text(event: Event) -> str:
    """What the agent reads in its pane: who wrote and from where, then the text.

    Another agent's message reads ``[from: backend] …``; a human's chat message
    ``[telegram:456 from Alice] …``, and a voice note's transcript
    ``[telegram:456 from Alice, voice note transcribed] …``. The sender's name is the provider's
    display name, chosen by a stranger: it loses control characters and brackets, so it cannot
    close the prefix and forge another one. A message typed at this machine (``agentcomms send``) has no prefix.
    """
    if event.type == "agent_message" and event.source_agent_id:
        return f"[from: {event.source_agent_id}] {event.text}"
    payload = event.payload
    if event.role != "human" or not payload.get("provider") or not payload.get("sender_id"):
        return event.text
    name = strip_unsafe(str(payload.get("sender_name") or "")).replace("[", "(").replace("]", ")")
    name = " ".join(name.split())[:SENDER_NAME_MAX] or str(payload["sender_id"])
    # A recognizer's words may be wrong: the agent is told they were heard, not typed.
    heard = ", voice note transcribed" if payload.get("transcribed") else ""
    return f"[{event.channel_id} from {name}{heard}] {event.text}"
