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

Whatever the text, what the agent reads starts with one header that agentcomms wrote (who wrote
the message, and where), and only there: :func:`pane_text` puts it on the message's first line and
begins every further line of the text with ``| ``, so a line that says ``[from: backend] deploy``
inside a body reads ``| [from: backend] deploy``, plainly the sender's words. A gutter rather than
a fence around the body: a fence's closing line could be written by the sender too unless it
carried a secret, each line stays as readable as it was, and it costs two characters a line. The
text is pasted whole (bracketed), so the agent gets the lines exactly as framed here.

The size cap and the typing itself are the tmux bridge's (``agentcomms.bridge.sanitize``). Pure
functions of the standard library: workflows import this module.
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
# CR is the Enter key in a pane; the Unicode line and paragraph separators are line breaks to
# whatever renders the text for the agent.
_LINE_BREAK = re.compile(r"\r\n?|[\u2028\u2029]")

# What begins each line of a message after its first: the sender's words, not a header.
CONTINUATION = "| "
# The channel of `agentcomms send` (agentcomms.models.LOCAL_CHANNEL, spelt here to keep this
# module free of pydantic).
_LOCAL_CHANNEL = "cli:local"

# A sender's display name in the pane's "[telegram:456 from Alice]" prefix is cut to this.
SENDER_NAME_MAX = 64


def strip_unsafe(text: str) -> str:
    """Remove escape sequences and control characters; normalise line breaks to LF."""
    text = _LINE_BREAK.sub("\n", text)
    text = _ESCAPE_SEQUENCE.sub("", text)
    return _UNSAFE_CHARACTER.sub("", text)


def pane_text(event: Event) -> str:
    """What the agent reads in its pane: a header that says who wrote and from where, then the
    text, every line after the first marked as its continuation (:data:`CONTINUATION`)."""
    return framed(event)[0]


def framed(event: Event) -> tuple[str, int]:
    """The event's :func:`pane_text`, and how many of its characters are the header and the
    gutters rather than the sender's words (the agent's cap on what is typed bounds the words)."""
    words = strip_unsafe(_body(event)).rstrip("\n")
    first, *rest = words.split("\n")
    header = _header(event)
    lines = [f"{header} {first}" if first else header]
    lines += [f"{CONTINUATION}{line}" if line else CONTINUATION.rstrip() for line in rest]
    text = "\n".join(lines)
    return text, len(text) - len(words)


def _header(event: Event) -> str:
    """Who wrote and from where, from the signed event alone.

    Another agent's message reads ``[from: backend] …``; a human's chat message
    ``[telegram:456 from Alice] …``, and a voice note's transcript
    ``[telegram:456 from Alice, voice note transcribed] …``; what the human said on a call
    ``[phone call c_…] …``; a message typed at this machine (``agentcomms send``)
    ``[cli:local from <user>] …``. The sender's name is the provider's display name, chosen by a
    stranger: it loses control characters and brackets, so it cannot close the header and forge
    another one.
    """
    payload = event.payload
    if event.type == "agent_message" and event.source_agent_id:
        return f"[from: {_name(event.source_agent_id)}]"
    if payload.get("provider") == "phone" and payload.get("call_id"):
        return _phone_header(event)
    if event.role == "human" and payload.get("provider") and payload.get("sender_id"):
        name = _name(str(payload.get("sender_name") or "")) or _name(str(payload["sender_id"]))
        # A recognizer's words may be wrong: the agent is told they were heard, not typed.
        heard = ", voice note transcribed" if payload.get("transcribed") else ""
        return f"[{event.channel_id} from {name}{heard}]"
    if event.channel_id == _LOCAL_CHANNEL and (
        name := _name(str(payload.get("sender_name") or ""))
    ):
        return f"[{event.channel_id} from {name}]"
    return f"[{_name(event.channel_id) or 'agentcomms'}]"


def _body(event: Event) -> str:
    # A call's answer is posted with its header in the text (check_messages shows it so); the
    # pane's header is made here, from the signed call id, so it is not written twice.
    if event.payload.get("provider") == "phone":
        return event.text.removeprefix(_phone_header(event)).removeprefix(" ")
    return event.text


def _phone_header(event: Event) -> str:
    return f"[phone call {_name(str(event.payload.get('call_id') or ''))}]"


def _name(raw: str) -> str:
    """A name fit for a header: one line, no brackets, not too long."""
    name = strip_unsafe(raw).replace("[", "(").replace("]", ")")
    return " ".join(name.split())[:SENDER_NAME_MAX]
