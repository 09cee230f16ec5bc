"""What a host's worker keeps of each process agent: its process, its session, its exact state.

A process agent's state is known, not guessed: busy from the prompt to the turn's end, waiting
while a permission request is open, ready between turns, offline when the process is gone. Each
change is reported to the agent's mailbox the way a pane agent's hooks report (a
:class:`HookReport` of kind ``acp``), so the mailbox holds messages while a turn runs and
`send --wait` learns the prompt was taken.

The session id is kept in a file on the host (``<sessions>/<agent>.json``) with the ids of the
messages already prompted: a worker that restarts, or an agent process that died, starts the
agent again and loads its session (``session/load``), and a message prompted once is never
prompted again. An agent that cannot load its session starts a new one only when its
registration allows it; otherwise it stays offline and says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentcomms.acp.client import AcpProcess, AgentFailedToStart, PermissionAsk, Update
from agentcomms.acp.kinds import located
from agentcomms.acp.pictures import Picture, image_blocks
from agentcomms.acp.rpc import ConnectionLost, RpcFailed
from agentcomms.agents.state import HookReport

log = logging.getLogger(__name__)

KIND = "acp"  # the kind of report a process agent's runner sends its mailbox
ProcessState = Literal["starting", "ready", "busy", "waiting", "offline"]
# Event ids remembered as prompted, per agent: the mailbox remembers fewer.
PROMPTED_KEPT = 2_000
# How much of a reply a turn keeps for whoever hears its end (the chat that asked).
REPLY_CHARS = 20_000
# How long a delivery waits for the agent to start before it lets the mailbox wait instead (its
# activity's timeout is 30 s); the start goes on, and its SessionStart report wakes the mailbox.
SUBMIT_WAITS_S = 10.0
# After its process died, an agent is started again this soon, then less often while it fails.
RESTART_FIRST_S = 0.5
RESTART_CAP_S = 60.0
# How long a new session waits for the turn it cancelled to end.
CANCEL_WAITS_S = 5.0

Reporter = Callable[[str, HookReport], Awaitable[None]]
# Who answers a permission request of the agent (its id, the request, its folder): the chosen
# option's id, or None to answer "cancelled".
Asker = Callable[[str, PermissionAsk, str], Awaitable[str | None]]


@dataclass(frozen=True)
class Spec:
    """How to run one process agent, from its signed registration."""

    command: tuple[str, ...]
    cwd: Path
    new_session_if_lost: bool = True


@dataclass
class Turn:
    """One prompt's turn, as it streams."""

    event_ids: list[str]
    prompt: str = ""  # what the mailbox looks for: each message's header and first words
    session_id: str | None = None
    reply: list[str] = field(default_factory=list)
    stop_reason: str | None = None
    error: str | None = None

    def reply_text(self) -> str:
        return "".join(self.reply)[:REPLY_CHARS]


# Who hears a turn start ("TurnStart") and end ("TurnEnd"): the mirror of its reply to a chat.
TurnObserver = Callable[[str, str, Turn], Awaitable[None]]
# Who hears each update of a turn as it streams (the console's view of it).
UpdateObserver = Callable[[str, Update], None]
# Who hears the agent's process started (its id, the pid), before it opens a session, and again
# as it asks a permission (a gateway started since hears it before the human is asked): the
# gateway, so that what the agent runs is never taken for the human.
StartObserver = Callable[[str, int], Awaitable[None]]


class NotReady(Exception):
    """The agent is in a turn or waits on a permission request: the prompt waits."""

    def __init__(self, agent_id: str, state: str) -> None:
        super().__init__(f"process agent {agent_id} is {state}: the message waits for its turn")
        self.state = state


class Unavailable(Exception):
    """The agent's process is not running and could not be started: messages wait."""


@dataclass(frozen=True)
class Wiring:
    """What a host gives each of its process agents: where their sessions are kept, who hears
    their state, who answers their permission requests, who hears their turns and streamed
    updates and which process each runs as, and how long a delivery waits for one to start."""

    sessions: Path
    report: Reporter
    ask: Asker
    turns: Sequence[TurnObserver] = ()
    updated: Sequence[UpdateObserver] = ()
    started: Sequence[StartObserver] = ()
    start_wait_s: float = SUBMIT_WAITS_S


class ProcessAgent:
    def __init__(self, agent_id: str, spec: Spec, wiring: Wiring) -> None:
        self.agent_id = agent_id
        self.spec = spec
        self._wiring = wiring
        self._file = wiring.sessions / f"{agent_id}.json"
        self.state: ProcessState = "offline"
        self.last_error: str | None = None
        self.session_id: str | None = None
        self._prompted: list[str] = []
        self._process: AcpProcess | None = None
        self._turn: Turn | None = None
        self._turn_task: asyncio.Task[None] | None = None
        self._start: asyncio.Task[None] | None = None
        self._asking: set[asyncio.Future[str | None]] = set()  # permission requests being asked
        self._watch: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()
        self._stopping = False
        # Started, and not stopped for good since: a worker that starts again resumes it.
        self._wanted = False
        self._at_ns = 0
        self._reports: asyncio.Queue[HookReport] = asyncio.Queue()
        self._reporting = asyncio.create_task(self._send_reports())
        self._load()

    # ---- what the mailbox asks ------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.alive

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def prompted(self, event_id: str) -> bool:
        return event_id in self._prompted

    async def ensure_started(self) -> None:
        """Start the process and open its session (the one kept, if any) unless it runs."""
        async with self._starting:
            if self.alive:
                return
            self._stopping = False
            self._set("starting")
            try:
                self._process = await AcpProcess.start(
                    located(self.spec.command),
                    cwd=self.spec.cwd,
                    on_update=self._on_update,
                    on_permission=self._on_permission,
                )
                await self._tell_process(self._process.pid)
                self.session_id = await self._open_session(self._process)
            except (AgentFailedToStart, ConnectionLost, RpcFailed, TimeoutError, OSError) as exc:
                self.last_error = str(exc) or type(exc).__name__
                if self._process is not None:
                    await self._process.stop()
                self._process = None
                self._set("offline", error=self.last_error)
                raise Unavailable(self.last_error) from exc
            self.last_error = None
            self._wanted = True
            self._save()
            self._watch = asyncio.create_task(self._watch_process(self._process))
            self._set("ready")

    async def submit(
        self,
        event_ids: list[str],
        text: str,
        needles: str,
        *,
        pictures: Sequence[Picture] = (),
    ) -> None:
        """Send one prompt carrying these messages; returns once the agent has it (the turn
        goes on beside). `needles` is what the mailbox looks for to call them submitted."""
        if not self.alive:
            await self._started_in_time()
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if pictures and self._process is not None and self._process.takes_images:
            blocks += await asyncio.to_thread(image_blocks, pictures, self.spec.cwd)
        if self.state != "ready":
            raise NotReady(self.agent_id, self.state)
        assert self._process is not None and self.session_id is not None
        turn = self._turn = Turn(
            event_ids=list(event_ids), prompt=needles, session_id=self.session_id
        )
        self._prompted = [*self._prompted, *event_ids][-PROMPTED_KEPT:]
        self._save()  # before the prompt leaves: a crash after it must not prompt it again
        self._set("busy", event="TurnStart", prompt=needles)
        self._turn_task = asyncio.create_task(self._run_turn(self._process, turn, blocks))

    def start_soon(self) -> asyncio.Task[None]:
        """Start the agent beside whatever asked, which may give up waiting (an activity's
        timeout) without stopping a start that takes long (a Node agent on a busy machine)."""
        if self._start is None or self._start.done():
            self._start = asyncio.create_task(self._start_quietly())
        return self._start

    async def _start_quietly(self) -> None:
        with contextlib.suppress(Unavailable):  # said in its state and last_error
            await self.ensure_started()

    async def _started_in_time(self) -> None:
        try:
            await asyncio.wait_for(asyncio.shield(self.start_soon()), self._wiring.start_wait_s)
        except TimeoutError:
            raise Unavailable(
                f"{self.spec.command[0]} is still starting; the message waits for it"
            ) from None
        if not self.alive:
            raise Unavailable(self.last_error or "its process ended as it started")

    async def cancel(self) -> bool:
        """Cancel the running turn (ACP's `session/cancel`); False when none runs."""
        if self._process is None or self.session_id is None or self._turn is None:
            return False
        await self._process.cancel(self.session_id)
        for asking in list(self._asking):
            asking.cancel()  # nobody is asked any more; the agent hears "cancelled"
        return True

    async def new_session(self) -> None:
        """Leave the session for a new one (a chat's ``/clear``): a turn running is cancelled
        first. The old session is left as it is, the agent's to keep; the new one is kept from
        now on, here and in the host's file, so a restart loads it."""
        if await self.cancel() and self._turn_task is not None:
            # An agent that does not end its cancelled turn gets its new session all the same.
            await asyncio.wait({self._turn_task}, timeout=CANCEL_WAITS_S)
        async with self._starting:
            if self._process is None or not self.alive:
                self.session_id = None  # the next start opens a new one
                self._save()
            else:
                self._set("starting")
                try:
                    self.session_id = await self._process.new_session(self.spec.cwd)
                except (ConnectionLost, RpcFailed, TimeoutError, AgentFailedToStart) as exc:
                    self.last_error = f"could not open a new session: {exc}"
                    self._set("offline", error=self.last_error)
                    raise Unavailable(self.last_error) from exc
                self._save()
                self._set("ready")
                return
        self.start_soon()

    async def stop(self, *, for_good: bool = True) -> None:
        """End the process cleanly; its session stays kept for the next start. Not `for_good`
        (the worker shuts down): the next worker on this host starts it again."""
        self._stopping = True
        if self._start is not None and not self._start.done():
            self._start.cancel()  # a start under way ends with nothing left running
            await asyncio.gather(self._start, return_exceptions=True)
        if for_good and self._wanted:
            self._wanted = False
            self._save()
        process, self._process = self._process, None
        if process is not None:
            await process.stop()
        if self._watch is not None:
            await asyncio.gather(self._watch, return_exceptions=True)
        if self._turn_task is not None:
            await asyncio.gather(self._turn_task, return_exceptions=True)
        self._set("offline", event="SessionEnd")
        await self._reports.join()

    async def close(self, *, for_good: bool = True) -> None:
        await self.stop(for_good=for_good)
        self._reporting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reporting

    # ---- the session ---------------------------------------------------------------------------

    async def _open_session(self, process: AcpProcess) -> str:
        if self.session_id is not None and process.can_load:
            try:
                await process.load_session(self.session_id, self.spec.cwd)
                return self.session_id
            except (RpcFailed, TimeoutError) as exc:
                if not self.spec.new_session_if_lost:
                    raise AgentFailedToStart(
                        f"could not load session {self.session_id}, and a new one starts only "
                        f"with --new-session-if-lost: {exc}"
                    ) from exc
                log.warning(
                    "%s: could not load session %s: %s", self.agent_id, self.session_id, exc
                )
        elif self.session_id is not None and not self.spec.new_session_if_lost:
            raise AgentFailedToStart(
                f"{self.spec.command[0]} cannot load session {self.session_id}"
            )
        return await process.new_session(self.spec.cwd)

    async def _run_turn(
        self, process: AcpProcess, turn: Turn, blocks: list[dict[str, Any]]
    ) -> None:
        # Told beside the prompt, never holding it up; heard before the turn's end is.
        started = asyncio.create_task(self._tell("TurnStart", turn))
        try:
            turn.stop_reason = await process.prompt(self.session_id or "", blocks)
        except (ConnectionLost, RpcFailed) as exc:
            turn.error = str(exc)
        finally:
            self._turn = None
        if process.alive:
            self._set("ready", event="TurnEnd")
        await started
        await self._tell("TurnEnd", turn)

    async def _tell_process(self, pid: int) -> None:
        for observer in self._wiring.started:
            try:
                await observer(self.agent_id, pid)
            except Exception:  # the agent runs all the same; the gateway refuses what it must
                log.exception("%s: an observer of its process failed", self.agent_id)

    async def _tell(self, event: str, turn: Turn) -> None:
        for observer in self._wiring.turns:
            try:
                await observer(self.agent_id, event, turn)
            except Exception:  # one observer failing must not keep the others from the turn
                log.exception("%s: a turn's observer failed", self.agent_id)

    async def _watch_process(self, process: AcpProcess) -> None:
        code = await process.wait()
        if self._stopping or process is not self._process:
            return
        self.last_error = f"the agent's process exited with code {code}"
        log.warning("%s: %s", self.agent_id, self.last_error)
        self._process = None
        self._set("offline", event="SessionEnd", error=self.last_error)
        # Started again, its session loaded, so what waits in the mailbox goes on; an agent
        # that keeps dying is tried less and less often.
        delay = RESTART_FIRST_S
        while not self._stopping and not self.alive:
            await asyncio.sleep(delay)
            if self._stopping or self.alive:
                return
            try:
                await self.ensure_started()
            except Unavailable:
                delay = min(delay * 2, RESTART_CAP_S)

    def _on_update(self, update: Update) -> None:
        turn = self._turn
        if turn is None:
            return  # a loaded session's replay, not a turn of now
        if update.kind == "agent_message_chunk" and update.text:
            turn.reply.append(update.text)
        for observer in self._wiring.updated:
            observer(self.agent_id, update)

    async def _on_permission(self, ask: PermissionAsk) -> str | None:
        self._set("waiting", event="PermissionRequest", tool=ask.title)
        if (pid := self.pid) is not None:
            await self._tell_process(pid)
        asking = asyncio.ensure_future(self._wiring.ask(self.agent_id, ask, str(self.spec.cwd)))
        self._asking.add(asking)
        try:
            return await asking
        except asyncio.CancelledError:
            if asking.cancelled() and not _cancelling():
                return None  # the turn was cancelled: ACP wants its open requests "cancelled"
            raise
        finally:
            self._asking.discard(asking)
            if self._turn is not None and self.alive:
                self._set("busy", event="PermissionAnswered")

    # ---- reports and the host's file ----------------------------------------------------------

    def _set(
        self,
        state: ProcessState,
        *,
        event: str | None = None,
        prompt: str | None = None,
        tool: str | None = None,
        error: str | None = None,
    ) -> None:
        self.state = state
        at_ns = self._at_ns = max(time.time_ns(), self._at_ns + 1)
        name = event or {"ready": "SessionStart", "offline": "SessionEnd"}.get(state)
        if name is None:
            return  # "starting" is the runner's own business
        summary = error[:160] if error else None
        self._reports.put_nowait(
            HookReport(
                kind=KIND,
                event=name,
                at_ns=at_ns,
                session_id=self.session_id,
                tool=tool[:64] if tool else None,
                summary=summary,
                prompt=prompt,
            )
        )

    async def _send_reports(self) -> None:
        # One at a time, in order: each carries its own time, so the mailbox keeps the newest.
        while True:
            report = await self._reports.get()
            try:
                await self._wiring.report(self.agent_id, report)
            except Exception as exc:  # the mailbox may be gone; the state is still right here
                log.warning("%s: could not report %s: %s", self.agent_id, report.event, exc)
            finally:
                self._reports.task_done()

    def _load(self) -> None:
        try:
            kept = json.loads(self._file.read_text())
        except (OSError, ValueError):
            return
        if isinstance(kept, dict):
            session_id = kept.get("session_id")
            self.session_id = session_id if isinstance(session_id, str) else None
            prompted = kept.get("prompted")
            self._prompted = (
                [i for i in prompted if isinstance(i, str)] if isinstance(prompted, list) else []
            )
            _end_leftover(kept.get("pid"), kept.get("command"))

    def _save(self) -> None:
        kept = {
            "session_id": self.session_id,
            "prompted": self._prompted,
            "pid": self.pid,
            "command": list(self.spec.command),
            "cwd": str(self.spec.cwd),
            "new_session_if_lost": self.spec.new_session_if_lost,
            "running": self._wanted,
        }
        self._file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self._file.with_suffix(".tmp")
        tmp.write_text(json.dumps(kept))
        tmp.replace(self._file)


def _cancelling() -> bool:
    """Whether this task itself is being cancelled (not only what it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _end_leftover(pid: Any, command: Any) -> None:
    """An agent a killed worker left running (it runs in its own process group) is ended before
    a new one starts: two would work in one folder on one session."""
    if not isinstance(pid, int) or not isinstance(command, list) or not command:
        return
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return
    if [part.decode(errors="replace") for part in cmdline if part] != command:
        return  # the pid is someone else's now
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
