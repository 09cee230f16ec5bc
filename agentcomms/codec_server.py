"""`agentcomms codec-server`: Temporal's remote codec protocol over HTTP, for the Temporal UI.

The UI posts ``{"payloads": [...]}`` (protobuf JSON: base64 metadata and data) to ``/decode``
to show a history, and to ``/encode`` to send a signal typed in the UI. Every request must carry
the token, as ``Authorization: Bearer <token>`` or as the first path segment
(``/<token>/decode``): the embedded UI is given a URL and sends no header of its own. Browsers
may call it only from the configured origins (CORS); a preflight needs no token, as browsers
send none. Like every HTTP door, it answers only to its own Host (``agentcomms.http_guard``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import Iterator
from typing import Any

import uvicorn
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.api.common.v1 import Payloads

from agentcomms.codec import EncryptionCodec, codec_for, codec_origins, codec_token
from agentcomms.config import TemporalConfig
from agentcomms.errors import ConfigError, ListenerUnavailable, PayloadDecryptionError
from agentcomms.http_guard import Doorman, Guard

# Histories are read a page at a time; a payload is at most 2 MB on the dev server.
MAX_BODY_BYTES = 16_000_000
ALLOWED_HEADERS = "authorization, content-type, x-namespace"


def codec_app(
    codec: EncryptionCodec, *, token: str, origins: list[str], doorman: Doorman
) -> Starlette:
    """The codec server's ASGI app: ``/encode`` and ``/decode``, with or without a token prefix."""
    allowed = set(origins)

    def cors(request: Request) -> dict[str, str]:
        origin = request.headers.get("origin")
        if origin is None or origin not in allowed:
            return {}
        return {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Methods": "POST, OPTIONS",
            "Access-Control-Allow-Headers": ALLOWED_HEADERS,
            "Access-Control-Allow-Credentials": "true",
            "Access-Control-Max-Age": "600",
            "Vary": "Origin",
        }

    def refused(request: Request, status: int, why: str) -> Response:
        headers = cors(request)
        if status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="agentcomms codec"'
        return JSONResponse({"error": why}, status_code=status, headers=headers)

    def presented(request: Request) -> str | None:
        prefix = request.path_params.get("token")
        if prefix is not None:
            return str(prefix)
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        return value.strip() if scheme.lower() == "bearer" and value.strip() else None

    async def handle(request: Request) -> Response:
        if request.method == "OPTIONS":
            headers = cors(request)
            return Response(status_code=204 if headers else 403, headers=headers)
        given = presented(request)
        if given is None:
            return refused(request, 401, "a token is required (Authorization: Bearer …)")
        if not hmac.compare_digest(given.encode(), token.encode()):
            return refused(request, 403, "wrong token")
        if request.headers.get("origin") and not cors(request):
            return refused(request, 403, "this origin may not call the codec server")
        body = await request.body()  # at most MAX_BODY_BYTES: the guard refuses more
        try:
            payloads = json_format.Parse(body, Payloads(), ignore_unknown_fields=True)
        except json_format.ParseError as exc:
            return refused(request, 400, f'expected {{"payloads": [...]}} as protobuf JSON: {exc}')
        coding = codec.encode if request.url.path.endswith("/encode") else codec.decode
        try:
            done = await coding(list(payloads.payloads))
        except PayloadDecryptionError as exc:
            return refused(request, 422, str(exc))
        result: dict[str, Any] = json_format.MessageToDict(Payloads(payloads=done))
        result.setdefault("payloads", [])
        return JSONResponse(result, headers=cors(request))

    methods = ["POST", "OPTIONS"]
    return Starlette(
        routes=[
            Route("/encode", handle, methods=methods),
            Route("/decode", handle, methods=methods),
            Route("/{token}/encode", handle, methods=methods),
            Route("/{token}/decode", handle, methods=methods),
        ],
        middleware=[Middleware(Guard, doorman=doorman, max_body=MAX_BODY_BYTES)],
    )


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The command that runs it (`up`, `codec-server`) owns Ctrl-C and stops it in order.
        yield


class CodecServer:
    """The codec server as a task of the running process (`up`, or `agentcomms codec-server`)."""

    def __init__(self, cfg: TemporalConfig) -> None:
        codec = codec_for(cfg)
        if codec is None:
            raise ConfigError(
                "temporal.encryption_keys is empty: payloads are not encrypted, so the codec "
                "server has nothing to do. Add a key first (see the README, Security)."
            )
        self.host, self.port = cfg.codec_server.host, cfg.codec_server.port
        origins = codec_origins(cfg)
        self._doorman = Doorman(self.host, self.port, origins=origins)
        app = codec_app(codec, token=codec_token(cfg), origins=origins, doorman=self._doorman)
        config = uvicorn.Config(
            app,
            host=self.host,
            port=self.port,
            lifespan="off",
            log_level="warning",
            access_log=False,  # the UI's requests carry the token in their path
        )
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        from agentcomms.address import port_problem

        problem = await asyncio.to_thread(port_problem, self.host, self.port)
        if problem is not None:
            raise ListenerUnavailable(
                f"the codec server cannot listen on {self.host}:{self.port} ({problem}): set "
                "temporal.codec_server.host / port"
            )
        self._task = asyncio.create_task(self._server.serve(), name="codec server")
        while not self._server.started:
            if self._task.done():
                self._task = None
                raise ListenerUnavailable(
                    f"The codec server cannot listen on {self.host}:{self.port} (in use, or not "
                    "an address of this machine); set temporal.codec_server.host / port"
                )
            await asyncio.sleep(0.01)
        if self.port == 0:  # tests: the port the system chose
            self.port = self._doorman.port = self._server.servers[0].sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._task is None:
            return
        self._server.should_exit = True
        await self._task
        self._task = None
