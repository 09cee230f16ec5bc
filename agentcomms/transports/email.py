"""Email: IMAP in, SMTP out. Channels are ``email:<the human's address>``.

Sending (``aiosmtplib``): each agent writes from its own plus-address (``agents+backend@…``,
named "backend (agentcomms)") with a Message-ID that carries its id (``<token.backend@…>``), so
the human's reply comes back to the agent that wrote, whichever header their mail client keeps.
An approval is a message with a reply code ("Reply YES K7QF or NO K7QF"), answered by a reply.
An agent's files are attached to the message that carries its words.
TLS is ``implicit``, ``starttls`` (refused when the server does not offer it) or ``none``;
``cafile`` names the CA of a server with a private certificate.

Receiving (``aioimaplib``, :mod:`agentcomms.transports._email_in`): IDLE where the server has it,
polling otherwise; see there.

Authentication by address alone means nothing in email (anyone can write any From), so a sender
is believed only when the operator's own receiving server says DKIM or SPF passed for that
address (``trusted_authserv_id``); nobody is believed by default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentcomms.transports._email_out import MAX_TEXT, EmailSender, subject_of

if TYPE_CHECKING:
    from agentcomms.config import Config
    from agentcomms.transports import InboundSink, Receiver

__all__ = ["MAX_TEXT", "EmailSender", "receiver", "sender", "subject_of"]


def receiver(cfg: Config, sink: InboundSink) -> Receiver:
    from agentcomms.transports._email_in import EmailReceiver

    return EmailReceiver(cfg, sink)


def sender(cfg: Config) -> EmailSender:
    return EmailSender(cfg)
