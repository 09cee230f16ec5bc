"""``agentcomms codec-server``: show encrypted histories in the Temporal UI, to whoever has the token."""

from __future__ import annotations

from agentcomms.cli import app
from agentcomms.cli.common import console, print_fields, run_async, styled
from agentcomms.config import Config, agentcomms_home, ensure_home, load_config


@app.command("codec-server")
def codec_server() -> None:
    """Serve /encode and /decode (Temporal's codec server protocol) for the Temporal UI.

    Needs temporal.encryption_keys. Listens on temporal.codec_server.host:port (127.0.0.1:8234)
    and answers only requests that carry its token, as `Authorization: Bearer TOKEN` or as the
    URL's first path segment (`http://127.0.0.1:8234/TOKEN`, the form to give a UI that sends
    no header). Browsers may call it from temporal.codec_server.origins (default: the embedded
    UI). `agentcomms up` runs one itself and points its embedded UI at it.
    """
    from agentcomms.logs import setup_logging

    ensure_home()
    cfg = load_config()
    setup_logging(cfg.logging)
    run_async(_serve, cfg)


async def _serve(cfg: Config) -> None:
    from agentcomms.codec import TOKEN_FILENAME, codec_origins
    from agentcomms.codec_server import CodecServer
    from agentcomms.runtime import stop_signals

    async with stop_signals() as stop:
        server = CodecServer(cfg.temporal)
        await server.start()
        token_from = (
            "temporal.codec_server.token"
            if cfg.temporal.codec_server.token is not None
            else str(agentcomms_home() / TOKEN_FILENAME)
        )
        console.print(styled(("codec server is up", "bold green"), " — Ctrl-C stops it"))
        print_fields(
            [
                ("Endpoint", f"http://{server.host}:{server.port}"),
                ("For a UI", f"http://{server.host}:{server.port}/TOKEN"),
                ("Token", f"in {token_from}"),
                ("Origins", ", ".join(codec_origins(cfg.temporal))),
            ]
        )
        try:
            await stop.wait()
        finally:
            await server.close()
