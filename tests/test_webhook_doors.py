"""The gateway's webhook server as a web page and a stranger attack it, at every door its app
mounts (read from the running app, with every provider taking webhooks and calls placed and
taken through Twilio): a request without its signature, or with a wrong one (garbage, another
key's, the right key's for another URL), a rebinding Host, another site's Origin, a 50 MB body
(declared, or chunked without end). Each is refused (before the body is read whole), nothing is
recorded (no event, no call row, no sound: the projection and the audio directory read back, a
call placed still ringing), and the gateway keeps serving the providers, whose Host is the
public one. A door the test does not know fails it. Real gateway, Temporal, tmux and SQLite; the providers' fakes sign."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Literal
from urllib.parse import urlencode, urlsplit

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy.engine import make_url
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from temporalio.testing import WorkflowEnvironment
from twilio.request_validator import RequestValidator

from agentcomms.approval_models import ApprovalRequest
from agentcomms.config import Config, VoiceConfig
from agentcomms.config.voice import InboundConfig
from agentcomms.ids import provider_event_id
from agentcomms.models import utcnow
from agentcomms.voice.audio import AudioStore
from gateway.approvals.push import ActionTokens, tokens_for
from tests.fakes.serve import free_port
from tests.fakes.slack import FakeSlack
from tests.fakes.twilio import OUR_NUMBER, FakeTwilio
from tests.fakes.twilio_calls import FakeTwilioCalls
from tests.fakes.whatsapp_cloud import VERIFY_TOKEN, FakeWhatsAppCloud
from tests.support.chat import (
    ALICE,
    CHAT,
    PUBLIC_URL,
    Configure,
    Hook,
    connected,
    with_slack,
    with_twilio,
)
from tests.support.doors import (
    CONTENT_TYPES,
    Door,
    concrete,
    database_rows,
    files_under,
    guarded_refusals,
    known_doors,
    unsigned_refused,
)
from tests.support.stack import Stack, register_recorder, running_stack
from tests.support.tmux import Tmux
from tests.support.voice import twilio_phone
from tests.support.waiting import eventually

PUBLIC_HOST = urlsplit(PUBLIC_URL).netloc
TELEGRAM_SECRET = "s3cret-token"
PIN = "2468"
ALIAS = "relay.internal"
NTFY_TOPIC = "alice-phone"  # a reverse proxy's name for the gateway (server.allowed_hosts)

# Which configuration mounts a door: everything through Twilio (SMS, WhatsApp, calls placed and
# taken) with Telegram by webhook; or WhatsApp through Meta's Cloud API (the same section); or
# Slack's Events API.
Variant = Literal["twilio", "cloud", "slack"]
DOORS: dict[Variant, list[Door]] = {
    "twilio": [
        Door("POST", "/webhooks/twilio/sms", "twilio"),
        Door("POST", "/webhooks/twilio/whatsapp", "twilio"),
        Door("POST", "/webhooks/telegram", "telegram"),
        # Calls placed: Twilio's callbacks for the call, and the audio it plays.
        *(
            Door("POST", f"/voice/twilio/{{call_id}}/{what}", "twilio")
            for what in ("answer", "twiml", "recording", "digits", "played", "status")
        ),
        Door("GET", "/voice/media/{call_id}/{file}", "media"),
        # Calls taken: the number's webhook, its status callback, a <Record>'s, each step.
        Door("POST", "/webhooks/twilio/voice", "twilio"),
        Door("POST", "/webhooks/twilio/voice/status", "twilio"),
        Door("POST", "/webhooks/twilio/voice/recording", "twilio"),
        Door("POST", "/webhooks/twilio/voice/{step}", "twilio"),
        # An approval's button in a push notification.
        Door("POST", "/actions/ntfy/{token}", "push"),
    ],
    "cloud": [
        Door("GET", "/webhooks/whatsapp", "meta-verify"),
        Door("POST", "/webhooks/whatsapp", "meta"),
    ],
    "slack": [
        Door("POST", "/webhooks/slack/events", "slack"),
        Door("POST", "/webhooks/slack/interactivity", "slack"),
    ],
}
# Routes served to anyone, deliberately, each with why (a health check, say): none so far.
PUBLIC: dict[tuple[str, str], str] = {}
# The inbound menu's step that posts a message; a sound of the call, Twilio's to fetch.
STEP = "message"
SOUND = "099-agent.wav"


def everything_through_twilio(
    fake: FakeTwilio, phone: FakeTwilioCalls, tmp_path: Path, agent: str, port: int
) -> Configure:
    """SMS and WhatsApp through Twilio, Telegram by webhook, calls placed and taken through
    Twilio (Alice may call in), behind ``PUBLIC_URL`` and a proxy's name."""

    def configure(cfg: Config) -> Config:
        cfg = with_twilio(fake, agent, port)(cfg)
        telegram = cfg.chat.telegram.model_copy(
            update={
                "enabled": True,
                "token": SecretStr("123:not-used"),
                "base_url": "http://127.0.0.1:9",  # never reached: the test posts its webhook
                "mode": "webhook",
                "webhook_secret": SecretStr(TELEGRAM_SECRET),
            }
        )
        voice = VoiceConfig(
            audio_dir=tmp_path / "audio",
            ring_timeout_s=600,  # the call placed rings through the attacks, and is ended
            phone=twilio_phone(phone, ALICE),
            inbound=InboundConfig(allowed_callers=[ALICE], pin=SecretStr(PIN)),
        )
        ntfy = cfg.chat.ntfy.model_copy(
            update={"enabled": True, "topic": NTFY_TOPIC, "server": "http://127.0.0.1:9"}
        )
        server = cfg.server.model_copy(update={"allowed_hosts": [ALIAS]})
        channels = cfg.chat.channels | {f"telegram:{CHAT}": agent, f"ntfy:{NTFY_TOPIC}": agent}
        allowed = cfg.chat.allowed_senders | {"telegram": [str(CHAT)]}
        chat = cfg.chat.model_copy(
            update={
                "telegram": telegram,
                "ntfy": ntfy,
                "channels": channels,
                "allowed_senders": allowed,
            }
        )
        return cfg.model_copy(update={"chat": chat, "server": server, "voice": voice})

    return configure


@pytest.fixture
async def doors_stack(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    twilio: FakeTwilio,
    twilio_voice: FakeTwilioCalls,
    agent: str,
) -> AsyncIterator[tuple[Stack, int]]:
    """Every door of `everything_through_twilio` open (support's `twilio_stack` opens only
    Twilio's messaging ones): the stack and the port its webhooks are taken on."""
    port = free_port()
    configure = everything_through_twilio(twilio, twilio_voice, tmp_path, agent, port)
    async with running_stack(temporal_env.client, tmp_path, configure=configure) as s:
        yield s, port


def _twilio_form(stack: Stack) -> dict[str, str]:
    """What Twilio would post to any of its doors, from Alice, for our account: a door that
    took it unsigned would take a message, start a menu, end a call, post a recording…"""
    return {
        "AccountSid": stack.cfg.voice.phone.account_sid or "",
        "From": ALICE,
        "To": OUR_NUMBER,
        "Body": "forged",
        "MessageSid": "SM" + "f" * 32,
        "CallSid": "CA" + "f" * 32,
        "CallStatus": "completed",
        "CallDuration": "3",
        "Digits": PIN,
        "SpeechResult": "forged",
        "RecordingSid": "RE" + "f" * 32,
        "RecordingStatus": "completed",
        "RecordingUrl": f"{stack.cfg.voice.phone.base_url}/Recordings/RE{'f' * 32}",
    }


def _twilio_sign(token: str, url: str, form: dict[str, str]) -> str:
    return str(RequestValidator(token).compute_signature(url, form))


def _twilio_tokens(cfg: Config) -> set[str]:
    sections = (cfg.chat.sms.auth_token, cfg.chat.whatsapp.auth_token, cfg.voice.phone.auth_token)
    return {t.get_secret_value() for t in sections if t is not None}


async def _refused(
    http: httpx.AsyncClient, door: Door, path: str, body: bytes, signature: str, why: str
) -> None:
    assert door.header is not None
    headers = {"Content-Type": CONTENT_TYPES[door.signing], door.header: signature}
    answer = await http.request(door.method, path, content=body, headers=headers)
    assert answer.status_code == 403, (door, why, answer.text)
    assert door.header in answer.text, (door, why, answer.text)


async def _forgeries_refused(
    stack: Stack,
    port: int,
    door: Door,
    path: str,
    audio: str,
    meta: FakeWhatsAppCloud | None,
    slack: FakeSlack | None = None,
) -> None:
    """Each way a stranger may sign a request for `door` is refused, as the door documents."""
    local = f"127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=f"http://{local}") as http:
        if door.signing == "twilio":
            form = _twilio_form(stack)
            body = urlencode(form).encode()
            forged = [
                ("garbage", "c2lnbmVkIGJ5IG5vYm9keQ=="),
                ("another account's key", _twilio_sign("not-our-token", PUBLIC_URL + path, form)),
            ]
            for token in _twilio_tokens(stack.cfg):
                # Our account's own key, for the address the gateway listens on (not the
                # public URL Twilio is given), or for another URL of ours.
                forged += [
                    (f"for {local}", _twilio_sign(token, f"http://{local}{path}", form)),
                    ("for another URL", _twilio_sign(token, f"{PUBLIC_URL}/elsewhere", form)),
                ]
            for why, signature in forged:
                await _refused(http, door, path, body, signature, why)
        elif door.signing == "telegram":
            update = {
                "update_id": 1,
                "message": {
                    "message_id": 1,
                    "date": int(time.time()),
                    "chat": {"id": CHAT, "type": "private"},
                    "from": {"id": CHAT, "is_bot": False, "first_name": "Alice"},
                    "text": "forged",
                },
            }
            body = json.dumps(update).encode()
            await _refused(http, door, path, body, "not-" + TELEGRAM_SECRET, "wrong secret")
        elif door.signing == "meta":
            assert meta is not None
            body = json.dumps(meta.incoming(ALICE, "forged", name="Alice")).encode()
            for why, signature in {
                "garbage": "sha256=forged",
                "another app's secret": meta.sign(body, "not-the-app-secret"),
                "another body's": meta.sign(b"{}"),
            }.items():
                await _refused(http, door, path, body, signature, why)
        elif door.signing == "slack":
            assert slack is not None
            event = slack.event_callback(slack.message(slack.general, "forged"))
            body = json.dumps(event).encode()
            if path.endswith("interactivity"):
                body = slack.interactivity_body({"type": "block_actions", "forged": True})
            for why, headers in {
                "garbage": {"X-Slack-Request-Timestamp": "1", "X-Slack-Signature": "v0=forged"},
                "another secret's": slack.sign(body, secret="not-the-signing-secret"),
                "another body's": slack.sign(b"{}"),
                "stale": slack.sign(body, timestamp=int(time.time()) - 600),
            }.items():
                answer = await http.post(
                    path, content=body, headers={"Content-Type": CONTENT_TYPES["slack"]} | headers
                )
                assert answer.status_code == 403, (door, why, answer.text)
                assert "X-Slack-Signature" in answer.text, (door, why, answer.text)
        elif door.signing == "push":
            # Buttons made by this deployment, and what a stranger makes of them: each is
            # refused before any approval is looked up.
            request = ApprovalRequest(
                id="K7QF", agent_id="backend", tool="Bash", input_text="ls", timeout_s=60
            )
            tokens = tokens_for(stack.gateway.key)
            soon = utcnow() + timedelta(hours=1)
            rightful = tokens.mint(request, NTFY_TOPIC, "a", expires=soon)
            tag = rightful.rpartition(".")[2]
            for why, token in {
                "garbage": "garbage",
                "another key's": ActionTokens(b"k" * 32).mint(
                    request, NTFY_TOPIC, "a", expires=soon
                ),
                "another answer's tag": rightful.replace(".K7QF.a.", ".K7QF.d."),
                "expired": tokens.mint(
                    request, NTFY_TOPIC, "a", expires=utcnow() - timedelta(seconds=1)
                ),
                "no tag": rightful.removesuffix(f".{tag}"),
            }.items():
                answer = await http.post(f"/actions/ntfy/{token}")
                assert answer.status_code == 403, (door, why, answer.text)
        elif door.signing == "meta-verify":
            for query in (
                "",
                "?hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=c",
                f"?hub.mode=unsubscribe&hub.verify_token={VERIFY_TOKEN}&hub.challenge=c",
            ):
                answer = await http.request(door.method, path + query)
                assert answer.status_code == 403, (door, query, answer.text)
                assert door.method == "HEAD" or "hub.verify_token" in answer.text
        else:
            signer = stack.gateway.media_signer()
            rightful = urlsplit(signer.url("", audio)).query
            params = dict(p.split("=") for p in rightful.split("&"))
            another = urlsplit(signer.url("", audio.replace("099-", "098-"))).query
            stale = urlsplit(signer.url("", audio, now=time.time() - 2 * signer.ttl_s)).query
            for why, query in {
                "unsigned": "",
                "garbage": f"exp={params['exp']}&sig={'0' * 64}",
                "another file's": another,
                "expired": stale,
                "no expiry": f"sig={params['sig']}",
            }.items():
                answer = await http.request(door.method, f"{path}?{query}")
                assert answer.status_code == 403, (door, why, answer.text)
                assert door.method == "HEAD" or "media URL" in answer.text, (why, answer.text)
                assert answer.content != b"our words"


async def _every_door_refuses_strangers(
    stack: Stack,
    port: int,
    agent: str,
    variant: Variant,
    *,
    call: str = "call-0123456789ab",
    meta: FakeWhatsAppCloud | None = None,
    slack: FakeSlack | None = None,
) -> None:
    """Every door the running webhook app serves is attacked (the calls' doors for `call`);
    nothing is recorded."""
    assert stack.gateway.http is not None
    app = stack.gateway.http.app
    doors = known_doors(app, DOORS[variant], PUBLIC)
    stale = set(DOORS[variant]) - {d for d, _ in doors}
    assert not stale, f"DOORS lists {stale}, which the webhook app no longer serves"

    audio_root = stack.cfg.voice.audio_root()
    audio = f"{call}/{SOUND}"
    AudioStore(audio_root).write(audio, b"our words", provider="test")
    signer = stack.gateway.media_signer()
    db = Path(make_url(stack.cfg.database.resolved_url()).database or "")
    before = database_rows(db), files_under(audio_root)

    for door, route in doors:
        params = {"call_id": call, "step": STEP, "file": SOUND, "token": "n1.forged"}
        path = concrete(route, params)
        if door.signing == "twilio":
            path += f"?agent={agent}&turn=1"  # whom a message is for, the call's turn
        present: dict[str, str] = {}
        if door.header is not None:
            await unsigned_refused(port, door, path)
            # Forged, but present: the door reads the body to check it. (Telegram's secret is
            # checked as it stands, before the body: this one is the right one.)
            forged = TELEGRAM_SECRET if door.signing == "telegram" else "sha256=forged"
            present = {door.header: forged, "Content-Type": CONTENT_TYPES[door.signing]}
        # The URL the provider is given, at the doors signed by query: served, to its Host.
        rightful = {
            "media": signer.url("", audio),
            "meta-verify": f"{path}?hub.mode=subscribe&hub.verify_token={VERIFY_TOKEN}",
        }.get(door.signing)
        if door.signing == "slack":  # signed now, as Slack signs: the door goes on to the body
            present |= {
                "X-Slack-Signature": "v0=forged",
                "X-Slack-Request-Timestamp": str(int(time.time())),
            }
        await _forgeries_refused(stack, port, door, path, audio, meta, slack)
        await guarded_refusals(port, door, path, present, rightful=rightful)

    assert (database_rows(db), files_under(audio_root)) == before

    # What the provider signs is still served at the doors signed by query: the attacks above
    # were turned away for their signature, not for being malformed.
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        for door, route in doors:
            if door.method == "GET" and door.signing == "media":
                got = await http.get(signer.url("", audio))
                assert got.status_code == 200 and got.content == b"our words"
            if door.method == "GET" and door.signing == "meta-verify":
                query = f"hub.mode=subscribe&hub.verify_token={VERIFY_TOKEN}&hub.challenge=c"
                got = await http.get(f"{route.path}?{query}")
                assert got.status_code == 200 and got.text == "c"


async def test_strangers_at_every_twilio_and_telegram_door_are_refused_and_alice_gets_through(
    doors_stack: tuple[Stack, int],
    twilio: FakeTwilio,
    twilio_voice: FakeTwilioCalls,
    agent: str,
    tmux: Tmux,
    tmp_path: Path,
) -> None:
    stack, port = doors_stack
    pane = await register_recorder(stack, tmux, tmp_path, agent)
    # A call placed, ringing: a forged callback that were taken would answer or end it. (Its
    # phone network cannot reach the public URL: nothing more comes for it while it rings.)
    placed = await stack.call("call", agent_id=agent, message="Shall I deploy?", wait=False)
    call = placed["call_id"]
    await eventually(lambda: _rung(stack, twilio_voice, agent), timeout=20)
    await _every_door_refuses_strangers(stack, port, agent, "twilio", call=call)
    assert [c.status for c in await stack.store.list_calls(agent_id=agent)] == ["ringing"]
    assert await stack.store.events_after(agent, None, 10) == []
    assert pane.read_bytes() == b""

    # Twilio posts to the public URL: its Host is the public one, and it is served; so is a
    # name the operator allowed (a proxy in front of the gateway).
    typed: list[bytes] = []
    sms = "/webhooks/twilio/sms"
    for host in (PUBLIC_HOST, f"{ALIAS}:{port}"):
        form = twilio.incoming(ALICE, f"still here via {host}")
        async with httpx.AsyncClient() as http:
            answer = await http.post(
                f"http://127.0.0.1:{port}{sms}",
                content=urlencode(form),
                headers={
                    "Host": host,
                    "Content-Type": CONTENT_TYPES["twilio"],
                    "X-Twilio-Signature": twilio.signature(PUBLIC_URL + sms, form),
                },
            )
        assert answer.status_code == 200, answer.text
        typed.append(f"[sms:{ALICE} from {ALICE}] still here via {host}\r".encode())
        await eventually(lambda: pane.read_bytes() == b"".join(typed))
        assert await stack.store.get_event(provider_event_id("sms", ALICE, form["MessageSid"]))

    # Twilio's own word that nobody answered the call, signed for the public URL, ends it.
    status = f"/voice/twilio/{call}/status"
    form = _twilio_form(stack) | {"CallStatus": "no-answer"}
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            f"http://127.0.0.1:{port}{status}",
            content=urlencode(form),
            headers={
                "Host": PUBLIC_HOST,
                "Content-Type": CONTENT_TYPES["twilio"],
                "X-Twilio-Signature": twilio_voice.signature(PUBLIC_URL + status, form),
            },
        )
    assert answer.status_code == 204, answer.text

    async def ended() -> bool:
        return [c.status for c in await stack.store.list_calls(agent_id=agent)] == ["no-answer"]

    await eventually(ended, timeout=20)


async def test_strangers_at_the_cloud_api_doors_are_refused_and_alice_still_gets_through(
    cloud_stack: tuple[Stack, Hook], meta: FakeWhatsAppCloud, agent: str, tmux: Tmux, tmp_path: Path
) -> None:
    stack, hook = cloud_stack
    port = hook.port
    pane = await register_recorder(stack, tmux, tmp_path, agent)
    await _every_door_refuses_strangers(stack, port, agent, "cloud", meta=meta)
    assert await stack.store.events_after(agent, None, 10) == []
    assert pane.read_bytes() == b""

    call = meta.incoming(ALICE, "still here", name="Alice")
    body = json.dumps(call).encode()
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            f"http://127.0.0.1:{port}/webhooks/whatsapp",
            content=body,
            headers={
                "Host": f"localhost:{port}",  # a tunnel that rewrites the Host to the local one
                "Content-Type": CONTENT_TYPES["meta"],
                "X-Hub-Signature-256": meta.sign(body),
            },
        )
    assert answer.status_code == 200, answer.text
    await eventually(
        lambda: pane.read_bytes() == f"[whatsapp:{ALICE} from Alice] still here\r".encode()
    )


async def _rung(stack: Stack, phone: FakeTwilioCalls, agent: str) -> bool:
    """The call was placed with Twilio, which tried to tell us it rings, and is kept."""
    tried = [c for c in phone.calls.values() if c.done.is_set()]
    return bool(tried) and bool(await stack.store.list_calls(agent_id=agent))


async def test_strangers_at_slacks_doors_are_refused_and_alice_still_gets_through(
    temporal_env: WorkflowEnvironment, tmp_path: Path, agent: str, tmux: Tmux, slack: FakeSlack
) -> None:
    port = free_port()
    configure = with_slack(slack, agent, port=port, mode="http")
    async with running_stack(temporal_env.client, tmp_path, configure=configure) as stack:
        await connected(stack, "slack")
        pane = await register_recorder(stack, tmux, tmp_path, agent)
        await _every_door_refuses_strangers(stack, port, agent, "slack", slack=slack)
        assert await stack.store.events_after(agent, None, 10) == []
        assert pane.read_bytes() == b""

        body = json.dumps(slack.event_callback(slack.message(slack.general, "hi"))).encode()
        async with httpx.AsyncClient() as http:
            answer = await http.post(
                f"http://127.0.0.1:{port}/webhooks/slack/events",
                content=body,
                headers={"Host": PUBLIC_HOST, "Content-Type": CONTENT_TYPES["slack"]}
                | slack.sign(body),
            )
        assert answer.status_code == 200, answer.text
        await eventually(
            lambda: pane.read_bytes() == f"[slack:{slack.general} from Alice] hi\r".encode()
        )


def test_a_door_the_test_does_not_know_fails_it() -> None:
    """A route added to the webhook app without its attacks here is named, not passed over."""
    known = [Route(door.route, _ok, methods=[door.method]) for door in DOORS["cloud"]]
    app = Starlette(routes=[*known, Route("/webhooks/new", _ok, methods=["POST"])])
    with pytest.raises(pytest.fail.Exception, match="serves POST /webhooks/new: add this door"):
        known_doors(app, DOORS["cloud"], PUBLIC)
    # Deliberately public, with its reason: served to anyone, and not failed.
    assert len(known_doors(app, DOORS["cloud"], {("POST", "/webhooks/new"): "a test's"})) == 3


async def _ok(request: Request) -> Response:
    return PlainTextResponse("ok")
