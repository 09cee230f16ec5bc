"""Reading an email the way its human meant it: the words they wrote (quoted text, signatures and
HTML markup gone), which agent it is for, and whether their own server vouches for the sender.

Plain functions of a parsed message, so each rule is tested alone.
"""

from __future__ import annotations

import re
from email.headerregistry import Address
from email.message import EmailMessage, Message
from email.utils import getaddresses, parseaddr
from html.parser import HTMLParser

# A line that starts what the reply quotes: "On Mon, 7 Dec 2026, Ann <a@x> wrote:" (one line or
# two), Outlook's "-----Original Message-----" or its underscore rule, a forwarded header block.
_QUOTE_INTRO = re.compile(r"^\s*On\b.{0,300}\bwrote:\s*$", re.IGNORECASE | re.DOTALL)
_OUTLOOK_RULE = re.compile(r"^\s*(-{3,}\s*Original Message\s*-{3,}|_{10,})\s*$", re.IGNORECASE)
_HEADER_BLOCK = re.compile(r"^\s*From:\s.+", re.IGNORECASE)
_SENT_LINE = re.compile(r"^\s*(Sent|Date):\s.+", re.IGNORECASE)
# "-- " alone on a line starts a signature (RFC 3676); phones add their own line at the end.
_SIGNATURE = re.compile(r"^(--|-- )$")
_SENT_FROM = re.compile(r"^\s*Sent from my \w[\w ]{0,40}$", re.IGNORECASE)


def words_of(text: str) -> str:
    """What the human wrote: everything before the quoted message or the signature, without
    lines quoted with ``>``."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kept: list[str] = []
    for i, line in enumerate(lines):
        two = f"{line} {lines[i + 1]}" if i + 1 < len(lines) else line
        if _SIGNATURE.match(line) or _OUTLOOK_RULE.match(line):
            break
        if _QUOTE_INTRO.match(line) or (
            line.lstrip().startswith("On ") and _QUOTE_INTRO.match(two)
        ):
            break
        if _HEADER_BLOCK.match(line) and i + 1 < len(lines) and _SENT_LINE.match(lines[i + 1]):
            break
        if line.lstrip().startswith(">") or _SENT_FROM.match(line):
            continue
        kept.append(line.rstrip())
    return "\n".join(kept).strip()


class _TextOfHtml(HTMLParser):
    """An HTML body's text: blocks become lines, quoted blocks and scripts are left out."""

    _BLOCKS = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre"})
    _SKIPPED = frozenset({"script", "style", "head", "title", "blockquote"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = " ".join(v or "" for k, v in attrs if k == "class")
        # Gmail and Apple Mail put the message being answered in a quote block of their own.
        if tag in self._SKIPPED or "gmail_quote" in classes or "moz-cite-prefix" in classes:
            self._skipping.append(tag)
        elif tag in self._BLOCKS and not self._skipping:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if self._skipping and self._skipping[-1] == tag:
            self._skipping.pop()
        elif tag in self._BLOCKS and not self._skipping:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(re.sub(r"[ \t\r\n]+", " ", data))


def html_to_text(html: str) -> str:
    parser = _TextOfHtml()
    parser.feed(html)
    parser.close()
    lines = (line.strip() for line in "".join(parser.parts).split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def body_text(message: EmailMessage) -> str:
    """The message's own words: its plain text part, or its HTML part reduced to text."""
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, ValueError):  # an unknown charset: what can be read of it
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    if not isinstance(content, str):
        return ""
    if part.get_content_subtype() == "html":
        content = html_to_text(content)
    return words_of(content)


def sender_address(message: Message) -> tuple[str, str] | None:
    """(address, name) of the one author in From; None when there is none, or several."""
    authors = getaddresses(message.get_all("From", []))
    if len(authors) != 1 or "@" not in authors[0][1]:
        return None
    name, address = authors[0]
    return address.strip().lower(), name.strip() or address.strip().lower()


def plus(address: str, detail: str) -> str:
    """``agents@example.com`` + ``backend`` → ``agents+backend@example.com``."""
    local, _, domain = address.partition("@")
    return f"{local}+{detail}@{domain}"


def agent_addressed(message: Message, address: str) -> str | None:
    """The agent named by plus-addressing in To, Cc or Delivered-To (``agents+backend@…``)."""
    local, _, domain = address.lower().partition("@")
    for header in ("Delivered-To", "To", "Cc"):
        for _, each in getaddresses(message.get_all(header, [])):
            each_local, _, each_domain = each.lower().partition("@")
            base, sep, detail = each_local.partition("+")
            if sep and detail and base == local and each_domain == domain:
                return each.partition("@")[0].partition("+")[2]
    return None


def new_message_id(token: str, agent_id: str | None, address: str) -> str:
    """Our Message-ID: ``<token.agent@domain>``, so a reply's In-Reply-To names the agent
    that wrote (the agent id has no ``@``; the token has no dot)."""
    domain = address.partition("@")[2]
    return f"<{token}.{agent_id}@{domain}>" if agent_id else f"<{token}@{domain}>"


_MESSAGE_IDS = re.compile(r"<([^<>@\s]+)@([^<>\s]+)>")


def agent_answered(message: Message, address: str) -> str | None:
    """The agent whose email this one answers: from our Message-ID in In-Reply-To, or else the
    last of ours in References."""
    domain = address.lower().partition("@")[2]
    ids: list[tuple[str, str]] = _MESSAGE_IDS.findall(str(message.get("In-Reply-To", "")))
    ids += reversed(_MESSAGE_IDS.findall(str(message.get("References", ""))))
    for local, each_domain in ids:
        token, dot, agent = local.partition(".")
        if each_domain.lower() == domain and dot and agent and re.fullmatch(r"[0-9a-f]{16}", token):
            return agent
    return None


def _without_comments(value: str) -> str:
    previous = None
    while previous != value:  # nested comments, innermost first
        previous, value = value, re.sub(r"\([^()]*\)", " ", value)
    return value


def _results(header: str) -> tuple[str, list[tuple[str, str, dict[str, str]]]] | None:
    """An Authentication-Results header (RFC 8601): its authserv-id and each (method, result,
    properties), or None when it cannot be read."""
    parts = [p.strip() for p in _without_comments(header).split(";")]
    if not parts or not parts[0]:
        return None
    authserv_id = parts[0].split()[0].strip('"').lower()
    found = []
    for part in parts[1:]:
        tokens = part.split()
        if not tokens or "=" not in tokens[0]:
            continue
        method, _, result = tokens[0].partition("=")
        props = {}
        for token in tokens[1:]:
            key, eq, value = token.partition("=")
            if eq and "." in key:
                props[key.lower()] = value.strip('"').lower()
        found.append((method.partition("/")[0].lower(), result.lower(), props))
    return authserv_id, found


def _passes(method: str, result: str, props: dict[str, str], address: str) -> bool:
    if result != "pass":
        return False
    domain = address.partition("@")[2]
    if method == "dkim":
        # The signing identity: the address itself, or the domain of the From address.
        identity = props.get("header.i", "")
        if "@" in identity and identity.partition("@")[0]:
            return identity == address
        return props.get("header.d", identity.lstrip("@")) == domain
    if method == "spf":
        mailfrom = props.get("smtp.mailfrom", "")
        return mailfrom == address if "@" in mailfrom else mailfrom == domain
    return False


def vouched_for(message: Message, address: str, authserv_id: str | None) -> bool:
    """Whether the operator's own receiving server (``authserv_id``) says DKIM or SPF passed for
    ``address``. Only the first of that server's headers counts: a receiving server adds its
    own above what the message came with, so any later one was written by the sender."""
    if not authserv_id:
        return False
    for header in message.get_all("Authentication-Results", []):
        parsed = _results(str(header))
        if parsed is None or parsed[0] != authserv_id.lower():
            continue
        return any(_passes(m, r, p, address) for m, r, p in parsed[1])
    return False


def is_address(value: str) -> bool:
    """One plain address, as a channel id holds it (``email:ann@example.com``)."""
    name, address = parseaddr(value)
    if not address or address != value or name:
        return False
    try:
        parsed = Address(addr_spec=address)
    except (ValueError, IndexError):
        return False
    return bool(parsed.username) and "." in parsed.domain
