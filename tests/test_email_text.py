"""Reading an email as its human meant it: their words without quotes, signatures or markup; the
agent it is for; whether their own server vouches for the sender; and what `doctor` says of the
configuration (each rule, table-driven)."""

from __future__ import annotations

from email import message_from_string, policy
from email.message import EmailMessage

import pytest

from agentcomms.config.chat import ChatConfig, EmailConfig
from agentcomms.transports._email_text import (
    agent_addressed,
    agent_answered,
    body_text,
    html_to_text,
    is_address,
    new_message_id,
    vouched_for,
    words_of,
)
from agentcomms.transports.email import subject_of

ME = "agents@example.com"
HUMAN = "ann@example.org"


def mail(headers: str, body: str = "hi\n") -> EmailMessage:
    message = message_from_string(f"{headers.strip()}\n\n{body}", policy=policy.default)
    assert isinstance(message, EmailMessage)
    return message


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        (
            "YES K7QF\n\nOn Mon, 7 Dec 2026 at 08:00, backend <agents+backend@example.com> wrote:\n"
            "> Reply YES K7QF or NO K7QF",
            "YES K7QF",
        ),
        # Gmail folds a long attribution over two lines.
        (
            "NO K7QF not the prod db\n\nOn Mon, 7 Dec 2026 at 08:00, backend (agentcomms)\n"
            "<agents+backend@example.com> wrote:\n> asks to use Bash",
            "NO K7QF not the prod db",
        ),
        ("ship it\n-- \nAnn Example\nCTO", "ship it"),
        ("ship it\n\nSent from my iPhone", "ship it"),
        ("done\n\n-----Original Message-----\nFrom: backend\nReply YES K7QF", "done"),
        ("done\n________________________________\nFrom: backend\nSent: Monday", "done"),
        ("looks good\nFrom: backend <agents+backend@example.com>\nSent: Monday\n> x", "looks good"),
        ("first\n> quoted in the middle\nsecond", "first\nsecond"),
        (
            "a line saying On Monday we ship\nstill mine",
            "a line saying On Monday we ship\nstill mine",
        ),
        ("  \r\nwindows\r\nlines\r\n", "windows\nlines"),
    ],
)
def test_only_the_humans_own_words_are_kept(written: str, meant: str) -> None:
    assert words_of(written) == meant


def test_html_is_reduced_to_its_text_without_the_quoted_message_or_scripts() -> None:
    html = (
        "<html><head><style>p{color:red}</style></head><body>"
        "<div>Run the <b>migration</b>&nbsp;now</div><div><br></div><p>then tell me</p>"
        "<script>alert(1)</script>"
        '<div class="gmail_quote">On Mon, backend wrote:<blockquote>Reply YES K7QF</blockquote></div>'
        "<blockquote>older</blockquote></body></html>"
    )
    assert html_to_text(html) == "Run the migration\xa0now\n\nthen tell me"


def test_a_message_of_html_only_reads_as_text_and_plain_text_is_preferred() -> None:
    html_only = mail(
        f"From: {HUMAN}\nContent-Type: text/html; charset=utf-8", "<p>YES K7QF</p><p>-- </p>"
    )
    assert body_text(html_only) == "YES K7QF"
    both = EmailMessage()
    both.set_content("plain words\n> quoted")
    both.add_alternative("<p>html words</p>", subtype="html")
    assert body_text(both) == "plain words"


TRUSTED = "mx.example.org"


@pytest.mark.parametrize(
    ("results", "vouched"),
    [
        ([f"{TRUSTED}; dkim=pass header.d=example.org header.s=s1"], True),
        ([f"{TRUSTED}; dkim=pass (good signature) header.i=@example.org"], True),
        ([f"{TRUSTED}; dkim=pass header.i={HUMAN}"], True),
        ([f"{TRUSTED}; spf=pass smtp.mailfrom={HUMAN}"], True),
        ([f"{TRUSTED}; spf=pass smtp.mailfrom=example.org"], True),
        ([f"{TRUSTED.upper()} 1; dkim=pass header.d=example.org"], True),
        # A pass for another domain or address proves nothing about this one.
        ([f"{TRUSTED}; dkim=pass header.d=evil.example"], False),
        ([f"{TRUSTED}; dkim=pass header.i=bob@example.org"], False),
        ([f"{TRUSTED}; spf=pass smtp.mailfrom=bob@example.org"], False),
        ([f"{TRUSTED}; spf=pass smtp.mailfrom=evil.example"], False),
        ([f"{TRUSTED}; dkim=fail header.d=example.org; spf=softfail smtp.mailfrom={HUMAN}"], False),
        ([f"{TRUSTED}; dkim=none; spf=none"], False),
        ([f"{TRUSTED}; dmarc=pass header.from=example.org"], False),
        ([f"{TRUSTED}; dkim=pass (header.d=example.org) header.d=evil.example"], False),
        # Another server's verdict is the sender's own words.
        (["mx.evil.example; dkim=pass header.d=example.org"], False),
        # The trusted server's own header comes first; one further down came with the message.
        (
            [
                f"{TRUSTED}; spf=fail smtp.mailfrom={HUMAN}",
                f"{TRUSTED}; dkim=pass header.d=example.org",
            ],
            False,
        ),
        ([], False),
        (["garbage without a verdict"], False),
    ],
)
def test_a_sender_is_believed_only_on_the_trusted_servers_pass_for_that_address(
    results: list[str], vouched: bool
) -> None:
    headers = "".join(f"Authentication-Results: {r}\n" for r in results)
    message = mail(f"{headers}From: Ann <{HUMAN}>")
    assert vouched_for(message, HUMAN, TRUSTED) is vouched


def test_no_sender_is_believed_when_no_server_is_trusted() -> None:
    message = mail(
        f"Authentication-Results: {TRUSTED}; dkim=pass header.d=example.org\nFrom: {HUMAN}"
    )
    assert vouched_for(message, HUMAN, None) is False


@pytest.mark.parametrize(
    ("headers", "agent"),
    [
        (f"In-Reply-To: {new_message_id('0123456789abcdef', 'backend', ME)}", "backend"),
        (f"In-Reply-To: {new_message_id('0123456789abcdef', 'web.v2-x', ME)}", "web.v2-x"),
        # Only References kept (some clients): the last of ours there.
        (
            "References: <0123456789abcdef.backend@example.com> <0123456789abcdef.web@example.com>",
            "web",
        ),
        # Someone else's Message-ID, or one of another domain, names no agent.
        ("In-Reply-To: <CAF=abc.backend@mail.gmail.com>", None),
        ("In-Reply-To: <0123456789abcdef.backend@evil.example>", None),
        ("In-Reply-To: <nothex.backend@example.com>", None),
        (f"In-Reply-To: {new_message_id('0123456789abcdef', None, ME)}", None),
    ],
)
def test_a_reply_goes_to_the_agent_whose_message_it_answers(
    headers: str, agent: str | None
) -> None:
    assert agent_answered(mail(f"From: {HUMAN}\n{headers}"), ME) == agent


@pytest.mark.parametrize(
    ("headers", "agent"),
    [
        ("To: agents+backend@example.com", "backend"),
        ("To: Someone <x@example.org>, AGENTS+Web@Example.com", "Web"),
        ("To: x@example.org\nCc: agents+ops@example.com", "ops"),
        ("Delivered-To: agents+backend@example.com\nTo: undisclosed-recipients:;", "backend"),
        ("To: agents@example.com", None),
        ("To: other+backend@example.com", None),
        ("To: agents+backend@evil.example", None),
    ],
)
def test_plus_addressing_names_the_agent(headers: str, agent: str | None) -> None:
    assert agent_addressed(mail(f"From: {HUMAN}\n{headers}"), ME) == agent


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("ann@example.org", True),
        ("ann+x@mail.example.org", True),
        ("Ann <ann@example.org>", False),
        ("ann@localhost", False),
        ("ann", False),
        ("ann@example.org, bob@example.org", False),
        ("ann@example.org\r\nBcc: eve@evil.example", False),
    ],
)
def test_a_channel_names_one_plain_address(value: str, ok: bool) -> None:
    assert is_address(value) is ok


def test_the_subject_is_the_first_line_cut_short() -> None:
    assert subject_of("\n  hello there\nmore", reply=False) == "hello there"
    assert subject_of("x" * 100, reply=True) == "Re: " + "x" * 69 + "…"
    assert subject_of("", reply=False) == "(no text)"


@pytest.mark.parametrize(
    ("section", "named"),
    [
        ({}, ["chat.email.trusted_authserv_id"]),
        ({"trusted_authserv_id": "mx.example.com"}, []),
        (
            {"trusted_authserv_id": "mx", "imap": {"host": "imap.example.com", "tls": "none"}},
            ["chat.email.imap.tls"],
        ),
        ({"trusted_authserv_id": "mx", "smtp": {"host": "127.0.0.1", "tls": "none"}}, []),
        ({"trusted_authserv_id": "mx", "smtp": {"cafile": "/nonexistent/ca.pem"}}, ["cafile"]),
    ],
)
def test_doctor_names_what_keeps_email_from_working_safely(
    section: dict[str, object], named: list[str]
) -> None:
    problems = EmailConfig.model_validate({"enabled": True, **section}).problems()
    assert len(problems) == len(named)
    for (problem, fix), name in zip(problems, named, strict=True):
        assert name in problem and fix


def test_addresses_in_the_config_are_read_in_lower_case_as_senders_are() -> None:
    chat = ChatConfig.model_validate(
        {
            "channels": {"email:Ann@Example.org": "backend", "telegram:42": "web"},
            "allowed_senders": {"email": ["Ann@Example.org"], "telegram": ["42"]},
        }
    )
    assert chat.channels == {"email:ann@example.org": "backend", "telegram:42": "web"}
    assert chat.allowed_senders == {"email": ["ann@example.org"], "telegram": ["42"]}
