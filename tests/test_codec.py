"""Message text encrypted in Temporal: the payload codec, key rotation, the codec server, `up`.

"Raw" means what anyone who reaches Temporal gets: a plain client (the SDK's converter, no codec)
fetching a history. The codec server is called as the Temporal UI calls it (protobuf JSON, from
the UI's origin), over real HTTP.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from google.protobuf import json_format
from google.protobuf.message import Message
from pydantic import SecretStr
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.client import Client, WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from agentcomms.codec import ENCODING, EncryptionCodec, codec_for
from agentcomms.codec_server import MAX_BODY_BYTES, CodecServer
from agentcomms.config import (
    CodecServerConfig,
    Config,
    EncryptionKey,
    TemporalConfig,
    load_config,
)
from agentcomms.errors import ConfigError, PayloadDecryptionError
from agentcomms.temporal import connect, dev_server_args, temporal_binary
from agentcomms.workflow_ids import mailbox_id
from tests.fakes.serve import free_port
from tests.support.cli import env_for, run, start_up, stop, wait_for_line
from tests.support.home import write_config
from tests.support.raw_http import knock
from tests.support.stack import Stack, running_stack
from tests.support.tmux import Tmux
from tests.support.waiting import eventually

SECRET_TEXT = "zebra-crossing-4711 the launch code"
K1 = base64.b64encode(b"1" * 32).decode()
K2 = base64.b64encode(b"2" * 32).decode()
TOKEN = "codec-token-for-the-ui-" + "t" * 20


def keys(*pairs: tuple[str, str]) -> list[EncryptionKey]:
    return [EncryptionKey(id=i, key=SecretStr(k)) for i, k in pairs]


def payloads_in(message: Message) -> Iterator[Payload]:
    """Every Payload anywhere in a history event (inputs, results, markers, memos…)."""
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            items = list(value.values())
        elif isinstance(value, Message):
            items = [value]
        else:  # a repeated field
            items = list(value)
        for item in items:
            if isinstance(item, Payload):
                yield item
            elif isinstance(item, Message):
                yield from payloads_in(item)


def sdk_bookkeeping(history: WorkflowHistory) -> list[Payload]:
    """What the SDK's markers keep for themselves (activity sequence numbers, patch names); the
    codec never sees it, and it holds none of ours."""
    kept = []
    for event in history.events:
        if event.HasField("marker_recorded_event_attributes"):
            details = event.marker_recorded_event_attributes.details
            kept += [p for name, ps in details.items() if name != "result" for p in ps.payloads]
    return kept


def raw_bytes(history: WorkflowHistory) -> bytes:
    return b"".join(event.SerializeToString() for event in history.events)


# ---- configuration --------------------------------------------------------------------------------


def test_a_key_of_the_wrong_length_is_a_clear_config_error(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    short = base64.b64encode(b"s" * 16).decode()
    monkeypatch.setenv("OLD_KEY", short)
    write_config(home, {"temporal": {"encryption_keys": [{"id": "k1", "key": "${OLD_KEY}"}]}})
    with pytest.raises(ConfigError) as err:
        load_config()
    message = str(err.value)
    assert "temporal.encryption_keys[0].key" in message
    assert "expected 32 bytes in base64 (16 bytes)" in message
    assert short not in message
    monkeypatch.setenv("OLD_KEY", "not base64 at all!")
    with pytest.raises(ConfigError, match="not base64"):
        load_config()


def test_two_keys_with_one_id_are_refused(home: Path) -> None:
    write_config(
        home,
        {"temporal": {"encryption_keys": [{"id": "k", "key": K1}, {"id": "k", "key": K2}]}},
    )
    with pytest.raises(ConfigError, match="id of its own"):
        load_config()


def test_keys_never_reach_config_show(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from agentcomms.cli import app

    monkeypatch.setenv("K1", K1)
    write_config(home, {"temporal": {"encryption_keys": [{"id": "k1", "key": "${K1}"}]}})
    shown = CliRunner().invoke(app, ["config", "show", "--json"])
    assert shown.exit_code == 0, shown.output
    assert K1 not in shown.output
    assert json.loads(shown.output)["temporal"]["encryption_keys"] == [{"id": "k1", "key": "***"}]


# ---- the codec ------------------------------------------------------------------------------------


async def test_rotation_old_keys_open_the_new_key_seals() -> None:
    plain = Payload(metadata={"encoding": b"json/plain"}, data=SECRET_TEXT.encode())
    before = EncryptionCodec([("k1", b"1" * 32)])
    sealed_k1 = (await before.encode([plain]))[0]
    assert (
        sealed_k1.metadata["encoding"] == ENCODING
        and sealed_k1.metadata["encryption-key-id"] == b"k1"
    )
    assert SECRET_TEXT.encode() not in sealed_k1.SerializeToString()

    rotated = EncryptionCodec([("k2", b"2" * 32), ("k1", b"1" * 32)])
    assert (await rotated.decode([sealed_k1]))[0] == plain  # the old key still opens
    sealed_k2 = (await rotated.encode([plain]))[0]
    assert sealed_k2.metadata["encryption-key-id"] == b"k2"  # the first key seals
    assert (await rotated.decode([sealed_k2]))[0] == plain

    retired = EncryptionCodec([("k2", b"2" * 32)])
    with pytest.raises(PayloadDecryptionError, match=r"'k1'.*no longer lists"):
        await retired.decode([sealed_k1])
    # A payload altered at rest, or relabelled with another key's id, does not open.
    altered = Payload()
    altered.CopyFrom(sealed_k2)
    altered.data = altered.data[:-1] + bytes([altered.data[-1] ^ 1])
    with pytest.raises(PayloadDecryptionError, match="altered"):
        await rotated.decode([altered])
    relabelled = Payload()
    relabelled.CopyFrom(sealed_k2)
    relabelled.metadata["encryption-key-id"] = b"k1"
    with pytest.raises(PayloadDecryptionError):
        await rotated.decode([relabelled])
    # Histories from before keys were configured stay readable.
    assert (await rotated.decode([plain]))[0] == plain


# ---- end to end: histories, and the codec server as the UI calls it -----------------------------


@pytest.fixture
async def sealed_stack(temporal_env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[Stack]:
    """A whole stack whose processes connect as `connect()` makes them: with the codec."""

    def configure(cfg: Config) -> Config:
        temporal = cfg.temporal.model_copy(
            update={
                "encryption_keys": keys(("k1", K1)),
                "codec_server": CodecServerConfig(port=0, token=SecretStr(TOKEN)),
            }
        )
        return cfg.model_copy(update={"temporal": temporal})

    address = temporal_env.client.service_client.config.target_host
    client = await connect(TemporalConfig(address=address, encryption_keys=keys(("k1", K1))))
    async with running_stack(client, tmp_path, configure=configure) as stack:
        yield stack


async def test_message_text_is_unreadable_raw_and_readable_through_the_codec(
    sealed_stack: Stack, temporal_env: WorkflowEnvironment, tmux: Tmux
) -> None:
    stack = sealed_stack
    agent = stack.agent_id()
    pane = tmux.new_session("cat", "cat")
    await stack.call("register", agent_id=agent, target=pane, socket=tmux.socket)
    sent = await stack.call("send", agent_id=agent, message=SECRET_TEXT, wait=True)
    assert sent["delivered"] is True
    await eventually(lambda: SECRET_TEXT in tmux.capture(pane))  # typed as ever

    plain: Client = temporal_env.client  # what anyone who reaches the port has
    handle = plain.get_workflow_handle(mailbox_id(agent))
    history = await handle.fetch_history()
    assert SECRET_TEXT.encode() not in raw_bytes(history)
    found = [p for event in history.events for p in payloads_in(event)]
    sealed = [p for p in found if p.metadata.get("encoding") == ENCODING]
    # Every payload is sealed but search attributes (agent id, status), which the server
    # indexes, and the SDK's own marker bookkeeping (activity sequence numbers, patch names):
    # neither carries text.
    unsealed = [p for p in found if p.data and p.metadata.get("encoding") != ENCODING]
    bookkeeping = sdk_bookkeeping(history)
    unsealed = [p for p in unsealed if "type" not in p.metadata and p not in bookkeeping]
    assert sealed and not unsealed, unsealed
    # Names and statuses stay readable for the UI's lists, and carry no text.
    description = await handle.describe()
    assert SECRET_TEXT not in repr(description.search_attributes) and SECRET_TEXT not in handle.id

    codec = codec_for(stack.cfg.temporal)
    assert codec is not None
    opened = await codec.decode(sealed)
    assert any(SECRET_TEXT.encode() in p.data for p in opened)

    server = CodecServer(stack.cfg.temporal)
    await server.start()
    try:
        await _the_ui_reads_it_through_the_codec_server(server, stack.cfg, sealed)
    finally:
        await server.close()


async def _the_ui_reads_it_through_the_codec_server(
    server: CodecServer, cfg: Config, sealed: list[Payload]
) -> None:
    base = f"http://{server.host}:{server.port}"
    ui_origin = f"http://localhost:{cfg.temporal.ui_port}"
    body = json_format.MessageToJson(_payloads(sealed))
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        # The browser's preflight first: no token in it, only the origin.
        preflight = await http.options(
            "/decode",
            headers={
                "Origin": ui_origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,x-namespace",
            },
        )
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-origin"] == ui_origin
        assert "x-namespace" in preflight.headers["access-control-allow-headers"]
        stranger = await http.options(
            "/decode",
            headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert stranger.status_code == 403
        assert "access-control-allow-origin" not in stranger.headers

        ui_headers = {
            "Origin": ui_origin,
            "Content-Type": "application/json",
            "X-Namespace": "default",
        }
        refused = await http.post("/decode", content=body, headers=ui_headers)
        assert refused.status_code == 401 and SECRET_TEXT not in refused.text
        wrong = await http.post(
            "/decode", content=body, headers=ui_headers | {"Authorization": "Bearer nope"}
        )
        assert wrong.status_code == 403 and SECRET_TEXT not in wrong.text
        wrong_path = await http.post("/nope/decode", content=body, headers=ui_headers)
        assert wrong_path.status_code == 403
        # A page that rebinds its own name to this address is refused, token or not.
        for rebinding in (
            {"Host": f"evil.example:{server.port}"},
            {"Origin": "http://evil.example"},
        ):
            headers = ui_headers | rebinding | {"Authorization": f"Bearer {TOKEN}"}
            refused = await http.post("/decode", content=body, headers=headers)
            assert refused.status_code == 403 and SECRET_TEXT not in refused.text

        for path, extra in (
            ("/decode", {"Authorization": f"Bearer {TOKEN}"}),
            (f"/{TOKEN}/decode", {}),  # how the embedded UI is pointed at it
        ):
            answer = await http.post(path, content=body, headers=ui_headers | extra)
            assert answer.status_code == 200, answer.text
            assert answer.headers["access-control-allow-origin"] == ui_origin
            decoded = answer.json()["payloads"]
            texts = b"".join(base64.b64decode(p.get("data", "")) for p in decoded)
            assert SECRET_TEXT.encode() in texts

        # A signal typed in the UI is sealed by /encode.
        plain = json_format.MessageToJson(
            _payloads([Payload(metadata={"encoding": b"json/plain"}, data=b'"hi"')])
        )
        encoded = await http.post(
            "/encode", content=plain, headers=ui_headers | {"Authorization": f"Bearer {TOKEN}"}
        )
        assert encoded.status_code == 200
        meta = encoded.json()["payloads"][0]["metadata"]
        assert base64.b64decode(meta["encoding"]) == ENCODING
    # A body past the cap is refused by its declared length, before the rest of it comes.
    too_big = {
        "Host": f"{server.host}:{server.port}",
        "Content-Length": str(MAX_BODY_BYTES + 1),
        "Authorization": f"Bearer {TOKEN}",
    }
    assert (await knock(server.port, "/decode", too_big, body=b'{"payloads"')).status == 413


def _payloads(items: list[Payload]) -> Payloads:
    return Payloads(payloads=items)


# ---- `up`: the embedded UI is pointed at the codec server it runs ---------------------------------


def test_the_dev_server_is_told_of_the_codec_server_only_with_keys(home: Path) -> None:
    cfg = Config().temporal.model_copy(
        update={
            "encryption_keys": keys(("k1", K1)),
            "codec_server": CodecServerConfig(port=9999, token=SecretStr(TOKEN)),
        }
    )
    args = dev_server_args(cfg)
    assert args[args.index("--ui-codec-endpoint") + 1] == f"http://127.0.0.1:9999/{TOKEN}"
    assert "--ui-codec-endpoint" not in dev_server_args(cfg, headless=True)
    assert "--ui-codec-endpoint" not in dev_server_args(Config().temporal)


@pytest.mark.timeout(90)
def test_up_runs_the_codec_server_and_the_embedded_ui_decodes_through_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ui_port, codec_port = free_port(), free_port()
    env = env_for(
        home,
        AGENTCOMMS_TEMPORAL__ADDRESS=f"127.0.0.1:{free_port()}",
        AGENTCOMMS_TEMPORAL__UI_PORT=str(ui_port),
        AGENTCOMMS_TEMPORAL__ENCRYPTION_KEYS=json.dumps([{"id": "k1", "key": K1}]),
        AGENTCOMMS_TEMPORAL__CODEC_SERVER__PORT=str(codec_port),
    )
    proc = start_up(env)
    try:
        printed = "".join(wait_for_line(proc, "Database"))
        assert f"http://127.0.0.1:{codec_port}" in printed
        token = (home / "codec-server.token").read_text().strip()
        assert (home / "codec-server.token").stat().st_mode & 0o077 == 0
        assert token not in printed
        # The UI tells the browser where its codec is: the codec server, token in the path.
        settings = httpx.get(f"http://127.0.0.1:{ui_port}/api/v1/settings", timeout=10).json()
        endpoint = settings["Codec"]["Endpoint"]
        assert endpoint == f"http://127.0.0.1:{codec_port}/{token}"

        sent = run(env, "send", "nobody-registered", SECRET_TEXT)  # it waits in its mailbox
        assert sent.returncode == 0, sent.stderr
        shown = subprocess.run(
            [
                str(temporal_binary()),
                "workflow", "show", "-w", "agent-nobody-registered", "--output", "json",
                "--address", env["AGENTCOMMS_TEMPORAL__ADDRESS"],
            ],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        assert SECRET_TEXT not in shown.stdout
        raw = json.loads(shown.stdout)
        signal = next(e for e in raw["events"] if "workflowExecutionSignaledEventAttributes" in e)[
            "workflowExecutionSignaledEventAttributes"
        ]["input"]
        for payload in signal["payloads"]:
            assert base64.b64decode(payload["metadata"]["encoding"]) == ENCODING
            assert SECRET_TEXT.encode() not in base64.b64decode(payload["data"])
        # As the UI does it: from its own origin, to the endpoint it was given.
        answer = httpx.post(
            f"{endpoint}/decode",
            json=signal,
            headers={"Origin": f"http://127.0.0.1:{ui_port}", "X-Namespace": "default"},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        data = b"".join(base64.b64decode(p["data"]) for p in answer.json()["payloads"])
        assert SECRET_TEXT.encode() in data
    finally:
        stop(proc)
