"""An approval's one-time link to the published console, in its email. The rules as unit tests:
when an email carries a link (a published console, a request shown whole, an address that may
answer, answers a page can offer), the token for one approval, request and address, under a key
of its own. Then the page on a real projection (SQLite) behind the real HTTP guard: opening it
changes nothing, a press answers once through the decide path, and a link used again, altered,
for an answer it does not offer, or once the approval is decided, answers nothing. The whole
path (the link in a real email, pressed) is in tests/test_email.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

from agentcomms.approval_models import ApprovalRequest, ApprovalView, Decision
from agentcomms.config import AgentConfig, Config, ConsoleConfig
from agentcomms.store import Store
from gateway.approvals.email_links import EmailLinks, link, no_link
from gateway.approvals.push import ActionRefused, ActionTokens
from gateway.http import WebhookServer
from workflows.approval.models import Decided

ADDRESS = "ann.lee+work@example.com"  # dots and a plus: an address is no plain token field
CONSOLE = "https://console.example.com"
NOW = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
TOKENS = ActionTokens(b"k" * 32)


def _request(**more: Any) -> ApprovalRequest:
    fields: dict[str, Any] = {
        "id": "K7QF",
        "agent_id": "backend",
        "tool": "Bash",
        "input_text": "touch done.txt",
        "timeout_s": 60,
        "nonce": "n1",
    }
    return ApprovalRequest.model_validate({**fields, **more})


def _config(*, public_url: str | None = CONSOLE, **agents: AgentConfig) -> Config:
    cfg = Config(console=ConsoleConfig(public_url=public_url), agents=agents)
    chat = cfg.chat.model_copy(update={"channels": {f"email:{ADDRESS}": "backend"}})
    return cfg.model_copy(update={"chat": chat})


NO_LINK = [
    ("no published console", _config(public_url=None), _request(), "not published"),
    (
        "a secret",
        _config(),
        _request(input_text="curl -H 'Authorization: Bearer abcdefgh12345678' x"),
        "looks like a secret",
    ),
    (
        "not an approver",
        _config(backend=AgentConfig(target="s:0.0", approvers=["slack:U0ALICE"])),
        _request(),
        f"email:{ADDRESS} is not one of backend's approvers",
    ),
    (
        "several to tick",
        _config(),
        _request(ask="question", question="Which?", options=["a", "b"], multi=True),
        "takes several options",
    ),
]


@pytest.mark.parametrize(("what", "cfg", "request_", "why"), NO_LINK, ids=[n[0] for n in NO_LINK])
def test_an_email_carries_no_link_where_the_console_could_not_answer_it(
    what: str, cfg: Config, request_: ApprovalRequest, why: str
) -> None:
    reason = no_link(cfg, request_, ADDRESS)
    assert reason is not None and why in reason
    assert link(cfg, TOKENS, request_, ADDRESS, now=NOW) is None


def test_a_link_opens_one_approval_for_one_address_under_a_key_of_its_own() -> None:
    url = link(_config(), TOKENS, _request(), ADDRESS, now=NOW)
    assert url is not None and url.startswith(f"{CONSOLE}/once/n1.K7QF.o.")
    press = TOKENS.read(unquote(url.rpartition("/")[2]), now=NOW + timedelta(hours=23))
    assert (press.approval_id, press.topic) == ("K7QF", ADDRESS)
    # A day by default, then it opens nothing; and no other key's token reads as one.
    with pytest.raises(ActionRefused, match="expired"):
        TOKENS.read(unquote(url.rpartition("/")[2]), now=NOW + timedelta(hours=24, seconds=1))
    with pytest.raises(ActionRefused, match="not made by this deployment"):
        ActionTokens(b"n" * 32).read(unquote(url.rpartition("/")[2]), now=NOW)


class Approvals:
    """The approvals' view and decide path as the links see them: the first answer wins."""

    def __init__(self, request: ApprovalRequest) -> None:
        self.view = ApprovalView(request=request, opened_at=NOW)
        self.decisions: list[Decision] = []

    async def look(self, approval_id: str) -> ApprovalView | None:
        return self.view if approval_id == self.view.request.id else None

    async def decide(self, decision: Decision) -> Decided:
        self.decisions.append(decision)
        if not self.view.open:
            return Decided(accepted=False, view=self.view)
        self.view = self.view.model_copy(update={"decision": decision})
        return Decided(accepted=True, view=self.view)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'projection.db'}")
    yield opened
    await opened.close()


async def test_opening_changes_nothing_a_press_answers_once_and_a_used_link_nothing_more(
    store: Store,
) -> None:
    cfg = _config()
    approvals = Approvals(_request())
    links = EmailLinks(cfg, TOKENS, store, approvals.look, approvals.decide)
    server = WebhookServer("127.0.0.1", 8235, links.routes(), public_url=CONSOLE)
    url = link(cfg, TOKENS, _request(), ADDRESS)
    assert url is not None
    path = url.removeprefix(CONSOLE)
    transport = httpx.ASGITransport(app=server.app)
    async with httpx.AsyncClient(transport=transport, base_url=CONSOLE) as browser:
        for _ in range(2):  # a mail scanner opens it first: nothing is spent
            page = await browser.get(path)
            assert page.status_code == 200, page.text
        assert "backend asks to use Bash:\ntouch done.txt" in page.text
        assert 'value="a">Allow</button>' in page.text and 'value="d">Deny' in page.text
        assert page.headers["referrer-policy"] == "no-referrer"
        assert approvals.decisions == []

        nothing = await browser.post(path, data={"answer": "o9"})
        assert nothing.status_code == 403 and "answers nothing" in nothing.text
        altered = await browser.post(path.replace(".o.", ".a."), data={"answer": "a"})
        assert altered.status_code == 403 and "not made by this deployment" in altered.text

        answered = await browser.post(path, data={"answer": "d"})
        assert answered.status_code == 200 and "K7QF: denied by" in answered.text
        [decision] = approvals.decisions
        assert (decision.behavior, decision.by, decision.via) == (
            "deny",
            f"email:{ADDRESS}",
            "email",
        )
        again = await browser.post(path, data={"answer": "a"})
        assert again.status_code == 409 and "pressed already" in again.text
        shown = await browser.get(path)
        assert "K7QF: denied by" in shown.text and "<form" not in shown.text
    assert len(approvals.decisions) == 1


async def test_a_link_for_a_chat_no_longer_the_agents_answers_nothing(store: Store) -> None:
    cfg = _config()
    approvals = Approvals(_request())
    url = link(cfg, TOKENS, _request(), ADDRESS)
    assert url is not None
    moved = cfg.model_copy(
        update={"chat": cfg.chat.model_copy(update={"channels": {f"email:{ADDRESS}": "web"}})}
    )
    links = EmailLinks(moved, TOKENS, store, approvals.look, approvals.decide)
    server = WebhookServer("127.0.0.1", 8235, links.routes(), public_url=CONSOLE)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=server.app), base_url=CONSOLE
    ) as browser:
        page = await browser.get(url.removeprefix(CONSOLE))
    assert page.status_code == 403 and "is not a chat of backend any more" in page.text
