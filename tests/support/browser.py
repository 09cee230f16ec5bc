"""A real browser for the console's tests: Debian's Chromium (``apt-get install chromium``),
driven by Playwright through its ``executable_path`` (Playwright never downloads one here), and a
stack whose gateway serves the console."""

from __future__ import annotations

import shutil
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright, expect
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import Config, ConsoleConfig
from tests.support.stack import Stack, running_stack

# A state change must reach an open page within a second; the browser gets a margin for a busy
# machine, and the assertion is on what the page shows.
SHOWN_S = 10_000


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("chromium is not installed: `apt-get install chromium` (the console's tests)")
    return path


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    """One headless Chromium (a module's tests share it: it is slow to start)."""
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=chromium_path(), headless=True, args=["--no-sandbox"]
        )
        try:
            yield browser
        finally:
            await browser.close()


def _with_console(cfg: Config) -> Config:
    return cfg.model_copy(update={"console": ConsoleConfig(enabled=True, port=0)})


@contextmanager
def serving(page: str) -> Iterator[str]:
    """Another site (its own origin, on a port of its own) serving one page: its address."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    """A page of its own for each test (its own cookies), in the module's browser."""
    context = await browser.new_context()
    try:
        yield await context.new_page()
    finally:
        await context.close()


@pytest.fixture
async def console_stack(
    temporal_env: WorkflowEnvironment, tmp_path: Path, home: Path
) -> AsyncIterator[Stack]:
    """A stack whose gateway serves the console (its token in the test's private `home`)."""
    async with running_stack(temporal_env.client, tmp_path, configure=_with_console) as stack:
        yield stack


def console_address(stack: Stack, *, token: bool = True) -> str:
    console = stack.gateway.console
    assert console is not None, "the stack's gateway serves no console"
    return console.address_with_token() if token else console.address


def console_cookies(stack: Stack) -> dict[str, str]:
    """A new session of the stack's console as its cookie, as the printed address leaves it in
    a browser."""
    console = stack.gateway.console
    assert console is not None, "the stack's gateway serves no console"
    return {console.access.cookie: console.access.open_session()}


def keep_console_port(stack: Stack) -> None:
    """The console's port, chosen by the system at start, kept for the gateway's next start (as
    `console.port` keeps it in a person's config): an open page's address stays its own."""
    console = stack.gateway.console
    assert console is not None, "the stack's gateway serves no console"
    kept = stack.cfg.console.model_copy(update={"port": console.server.port})
    stack.cfg = stack.cfg.model_copy(update={"console": kept})


async def open_console(page: Page, stack: Stack, path: str = "") -> None:
    """The console opened from the address printed with its token, then `path`."""
    await page.goto(console_address(stack))
    assert "?t=" not in page.url, "the token stays in the address bar"
    if path:
        await page.goto(console_address(stack, token=False).rstrip("/") + path)
    await expect(page.locator("#live")).to_have_text("live", timeout=SHOWN_S)
