"""Message text encrypted in Temporal: the payload codec every process's client uses.

With ``temporal.encryption_keys`` set, every payload (a message's text, a transcript, a workflow's
state) is sealed with AES-256-GCM before it leaves the process, so the Temporal server, its
database and anyone who reads raw histories see ciphertext. The first key seals; a payload names
its key in its metadata, so every listed key still opens what it sealed (rotation: put a new key
first, keep the old ones while histories sealed with them live).

Workflow ids (``agent-<id>``, ``call-<id>``) and search attributes (agent id, status) are not
payloads and stay readable: they carry names, never message text.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from urllib.parse import quote

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, PayloadCodec

from agentcomms.config import TemporalConfig, agentcomms_home
from agentcomms.config.home import private_secret
from agentcomms.errors import PayloadDecryptionError

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
NONCE_BYTES = 12
TOKEN_FILENAME = "codec-server.token"


class EncryptionCodec(PayloadCodec):
    """AES-GCM over each whole payload (its metadata included), keyed by id."""

    def __init__(self, keys: Sequence[tuple[str, bytes]]) -> None:
        if not keys:
            raise ValueError("an encryption codec needs at least one key")
        self._sealing_id = keys[0][0]
        self._keys = {key_id: AESGCM(secret) for key_id, secret in keys}

    def __repr__(self) -> str:
        return f"EncryptionCodec(sealing with {self._sealing_id!r})"

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.seal(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.open(p) for p in payloads]

    def seal(self, payload: Payload) -> Payload:
        key_id = self._sealing_id
        nonce = os.urandom(NONCE_BYTES)
        # The key id is bound in: a payload relabelled with another id does not open.
        sealed = self._keys[key_id].encrypt(nonce, payload.SerializeToString(), key_id.encode())
        return Payload(
            metadata={"encoding": ENCODING, KEY_ID: key_id.encode()}, data=nonce + sealed
        )

    def open(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload  # written before keys were configured: plain as it was
        key_id = payload.metadata.get(KEY_ID, b"").decode("utf-8", "replace")
        aead = self._keys.get(key_id)
        if aead is None:
            raise PayloadDecryptionError(
                f"a payload is sealed with encryption key {key_id!r}, which "
                "temporal.encryption_keys no longer lists; add it back (after the new key)"
            )
        nonce, sealed = payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:]
        try:
            plain = aead.decrypt(nonce, sealed, key_id.encode())
        except InvalidTag:
            raise PayloadDecryptionError(
                f"a payload sealed with key {key_id!r} does not open: it was altered, or the "
                "key under that id changed"
            ) from None
        opened = Payload()
        opened.ParseFromString(plain)
        return opened


def codec_for(cfg: TemporalConfig) -> EncryptionCodec | None:
    if not cfg.encryption_keys:
        return None
    return EncryptionCodec([(k.id, k.secret()) for k in cfg.encryption_keys])


def data_converter(cfg: TemporalConfig) -> DataConverter:
    """The converter every client uses: pydantic models, sealed when keys are configured."""
    codec = codec_for(cfg)
    if codec is None:
        return pydantic_data_converter
    return dataclasses.replace(pydantic_data_converter, payload_codec=codec)


# ---- the codec server's address, token and allowed origins -----------------------------------


def codec_token(cfg: TemporalConfig) -> str:
    """The token the codec server asks of every request: configured, or this host's own."""
    if cfg.codec_server.token is not None:
        return cfg.codec_server.token.get_secret_value()
    return private_secret(agentcomms_home() / TOKEN_FILENAME, "the codec server's token")


def codec_origins(cfg: TemporalConfig) -> list[str]:
    if cfg.codec_server.origins:
        return [o.rstrip("/") for o in cfg.codec_server.origins]
    return [f"http://127.0.0.1:{cfg.ui_port}", f"http://localhost:{cfg.ui_port}"]


def codec_base_url(cfg: TemporalConfig) -> str:
    server = cfg.codec_server
    return f"http://{server.host}:{server.port}"


def ui_codec_endpoint(cfg: TemporalConfig) -> str | None:
    """What the embedded UI is told to call, token included as the first path segment (the UI
    sends no header of its own); None without keys, when there is nothing to decode."""
    if not cfg.encryption_keys:
        return None
    return f"{codec_base_url(cfg)}/{quote(codec_token(cfg), safe='')}"
