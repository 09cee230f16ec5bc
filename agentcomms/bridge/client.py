"""Running one tmux client: its arguments, its stdin, what it printed, how it failed.

Every delivery starts a tmux client, so what starting one costs this process is paid once per
message. asyncio's own subprocess support starts a thread per child to wait for it, and builds a
transport and a protocol per pipe: measured, about 1.5 ms of this process's CPU per delivery
against 1.0 ms for the same client started here and waited for in a thread that is kept. The
client is started on the event loop's thread (as asyncio does) and waited for in the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

from agentcomms.errors import PaneNotFound, TmuxError

# Threads that wait for tmux clients. A client may wait out its submit delay (150 ms by default)
# before it ends, so as many may run at once as agents are typed into at once: more than the
# default pool's few, which would queue one agent's typing behind another's delay.
_WAITERS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="tmux-client")

# tmux words it differently depending on the command ("can't find pane: 7", "no such pane: %9").
_NOT_FOUND = re.compile(
    r"can't find (?:session|window|pane)"
    r"|no such (?:session|window|pane)"
    r"|no server running on"
    r"|error connecting to .*\((?:No such file or directory|Connection refused)\)"
)


async def run_client(
    tmux: str, socket: str | None, args: list[str], *, stdin: bytes | None, timeout: float
) -> str:
    """Run one tmux client; return its stdout, or raise PaneNotFound / TmuxError."""
    argv = [tmux, *(["-S", socket] if socket is not None else []), *args]
    try:
        # Started on the loop's thread, as asyncio's create_subprocess_exec starts it too: the
        # fork and exec do not wait for the client, only the waiting does (in the pool).
        proc = subprocess.Popen(  # noqa: ASYNC220
            argv,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except FileNotFoundError as exc:
        raise TmuxError(f"tmux is not installed (no {tmux!r} on PATH)") from exc
    waiting = _WAITERS.submit(_communicate, proc, stdin, timeout)
    try:
        out, err = await asyncio.wrap_future(waiting)
    except subprocess.TimeoutExpired as exc:
        raise TmuxError(f"tmux did not answer within {timeout:.1f} s") from exc
    finally:
        # Cancelled: end our own client (its waiting thread then reaps it). Anything it already
        # handed the server (text, marker, the background Enter) still happens; nothing else will.
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            if waiting.cancelled():  # cancelled before a thread took it: reaped by no one else
                _WAITERS.submit(proc.communicate)
    stderr = err.decode("utf-8", "replace").strip()
    if proc.returncode != 0:
        where = f"tmux server at {socket}" if socket else "default tmux server"
        if _NOT_FOUND.search(stderr):
            # "no server running on /path" already names the server; others do not.
            raise PaneNotFound(stderr if socket and socket in stderr else f"{stderr} ({where})")
        raise TmuxError(
            f"tmux failed ({where}): {stderr or f'exit status {proc.returncode}'}",
            stderr=stderr,
            returncode=proc.returncode,
        )
    return out.decode("utf-8", "replace")


def _communicate(
    proc: subprocess.Popen[bytes], stdin: bytes | None, timeout: float
) -> tuple[bytes, bytes]:
    """In a waiting thread: the client's output once it ended; a client past `timeout` is
    killed and reaped before TimeoutExpired is raised."""
    try:
        return proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
