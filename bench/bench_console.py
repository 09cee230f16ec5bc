"""The console: the agents page with many agents, and a state change reaching an open page.

- **render**: `GET /` with 1,000 agents in the projection, in the app itself (ASGI, no socket), so
  the figure is the server's time: reading the agents as `agents --json` does, their last
  events, the open approvals, and the HTML. Beside it, a bare Starlette response of the same
  size through the same path.
- **state → page**: a page's event stream open over a real socket; an agent's row written as
  its mailbox writes it (a new state); the time until the stream carries that agent's change.
  Beside it, a bare Starlette event stream told directly, over the same kind of socket.

    .venv/bin/python -m bench.bench_console [--agents 1000] [--renders 20] [--changes 20]
        [--database-url postgresql+asyncpg://user@host/empty_db]

With PostgreSQL the state change is announced by the tables as it commits (the console reads
nothing until then); with SQLite (the default) the console reads what changed every 250 ms.

The mailbox's own write after a hook is not in the second figure (`bench_hooks.py` and
`bench_mailbox.py` measure that path).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route

from agentcomms.config import Config, ConsoleConfig, DatabaseConfig
from agentcomms.models import Agent, utcnow
from bench.common import free_port, latency_page, machine, summarize, temporal, write_results
from gateway.service import Gateway


async def _agents(store: Any, count: int) -> None:
    for n in range(count):
        await store.settle_events(
            [],
            agent=Agent(
                id=f"agent-{n:04d}",
                target=f"work:{n}.0",
                host="bench-host",
                status="online",
                state="ready",
                state_since=utcnow(),
            ),
        )


async def _timed(client: httpx.AsyncClient, path: str, rounds: int) -> tuple[list[float], int]:
    times, size = [], 0
    for _ in range(rounds):
        started = time.perf_counter()
        answer = await client.get(path)
        times.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, answer.text[:200]
        size = len(answer.content)
    return times, size


async def _change_seen(
    stream_url: str, cookies: dict[str, str], change: Any, needle: str, rounds: int
) -> list[float]:
    """Open the stream, then `rounds` times: make a change, time until `needle` (with the
    round's number) arrives."""
    times: list[float] = []
    async with (
        httpx.AsyncClient(cookies=cookies, timeout=30) as client,
        client.stream("GET", stream_url) as stream,
    ):
        lines = stream.aiter_lines()
        await asyncio.sleep(0.5)  # the stream's first read of the projection is behind it
        for n in range(rounds):
            started = time.perf_counter()
            await change(n)
            async for line in lines:
                if f"{needle}{n}" in line:
                    break
            times.append((time.perf_counter() - started) * 1000)
    return times


def _bare_stream_app(size: int) -> tuple[Starlette, asyncio.Queue[int]]:
    told: asyncio.Queue[int] = asyncio.Queue()
    page = "x" * size

    async def html(_: Request) -> Response:
        return HTMLResponse(page)

    async def events(_: Request) -> Response:
        async def messages() -> AsyncIterator[str]:
            yield "retry: 1000\n\n"
            while True:
                n = await told.get()
                yield f'event: agent\ndata: {{"state": "busy-{n}"}}\n\n'

        return StreamingResponse(messages(), media_type="text/event-stream")

    return Starlette(routes=[Route("/", html), Route("/stream", events)]), told


async def _serve(app: Starlette) -> tuple[uvicorn.Server, asyncio.Task[None], int]:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            raise RuntimeError(f"the bare server did not start on port {port}")
        await asyncio.sleep(0.01)
    return server, task, port


async def main(args: argparse.Namespace) -> None:
    report: dict[str, Any] = {"machine": machine(), "results": {}}
    with tempfile.TemporaryDirectory(prefix="acb-") as tmp:
        async with temporal(Path(tmp), product=False, configure=_database(args)) as rt:
            cfg = rt.cfg.model_copy(update={"console": ConsoleConfig(port=0)})
            gateway = Gateway(cfg, rt.client, rt.store)
            await gateway.start()
            try:
                console = gateway.console
                assert console is not None
                await _agents(rt.store, args.agents)
                cookies = {console.access.cookie: console.access.open_session()}
                base = console.address.rstrip("/")
                asgi = httpx.ASGITransport(app=console.server.app)
                async with httpx.AsyncClient(transport=asgi, base_url=base, cookies=cookies) as c:
                    await _timed(c, "/", 2)  # templates compiled, connections opened
                    render, size = await _timed(c, "/", args.renders)
                bare_app, told = _bare_stream_app(size)
                bare_asgi = httpx.ASGITransport(app=bare_app)
                async with httpx.AsyncClient(transport=bare_asgi, base_url=base) as c:
                    bare_render, _ = await _timed(c, "/", args.renders)
                report["results"][f"agents page, {args.agents} agents ({size:,} bytes)"] = (
                    summarize(render)
                )
                report["results"]["bare Starlette response, same size"] = summarize(bare_render)

                async def state_change(n: int) -> None:
                    await rt.store.settle_events(
                        [],
                        agent=Agent(
                            id="agent-0007",
                            target="work:7.0",
                            host="bench-host",
                            status="online",
                            state="waiting",
                            waiting_for=f"round {n}",
                            state_since=utcnow(),
                        ),
                    )

                seen = await _change_seen(
                    f"{base}/stream", cookies, state_change, "(round ", args.changes
                )
                database = (
                    "PostgreSQL, announced" if args.database_url else "SQLite, read every 250 ms"
                )
                report["results"][f"state change → the page's stream ({database})"] = summarize(
                    seen
                )
            finally:
                await gateway.close()
            server, task, port = await _serve(bare_app)
            try:

                async def tell(n: int) -> None:
                    told.put_nowait(n)

                bare_seen = await _change_seen(
                    f"http://127.0.0.1:{port}/stream", {}, tell, "busy-", args.changes
                )
            finally:
                server.should_exit = True
                await task
            report["results"]["bare Starlette stream, told directly"] = summarize(bare_seen)
    about = (
        f"Server time of the agents page with {args.agents} agents (aim: ≤ 300 ms) beside a bare "
        "response of the same size, both in-process through ASGI; a state change written to "
        "the projection until an open page's stream carries it (aim: ≤ 1 s), beside a bare "
        "stream told directly."
    )
    markdown = latency_page("Console", report, about, "what")
    print(markdown)
    write_results("console-postgresql" if args.database_url else "console", report, markdown)


def _database(args: argparse.Namespace) -> Any:
    def configure(cfg: Config) -> Config:
        if not args.database_url:
            return cfg
        return cfg.model_copy(update={"database": DatabaseConfig(url=args.database_url)})

    return configure


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--renders", type=int, default=20)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--database-url", help="the projection (default: a SQLite file)")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(_args()))
