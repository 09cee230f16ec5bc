"""Typing untrusted text into tmux panes, at most once per event.

A first delivery to a pane is two tmux invocations (no shell anywhere):

1. a probe (:mod:`.probe`) that resolves the target strictly to a pane id (``%7``) and reads the
   pane's record of the events already typed there. If the record holds this event id, an
   earlier attempt typed it: nothing is typed again.
2. one command sequence, separated by standalone ``;`` arguments, against the pane id::

       [load-buffer -b NAME - ;]       text on stdin (multi-line, tabbed or long text)
       copy-mode -q -t %7 ;            a pane in copy mode would eat the keys as mode commands
       send-keys -t %7 -l -- TEXT ;    or: paste-buffer -p -r -d -b NAME -t %7
       set-option -p -t %7 @agentcomms_last_event EVT ;
       set-option -F -p -t %7 @agentcomms_recent_events "EVT #{=32000:@agentcomms_recent_events}" ;
       run-shell -b -C -d 0.150 "send-keys -t %7 Enter" ;
       run-shell -d 0.160

   The record is a window of recent ids, not just the last one, because the agent workflow types
   through *local* activities: when a workflow task is lost (a worker dies, or the server drops a
   task superseded by new signals) the SDK replays from history and runs again every local
   activity since the last completed task -- measured in the mailbox tests: runs of 80-160
   deliveries re-executed in order. The window is kept by tmux itself (``-F`` expands the old
   value server-side, ``#{=N:…}`` trims it), so it needs no read-modify-write from here; a trimmed
   fragment at its end cannot match an id because every whole entry ends with a space.

   The text and the record run in one uninterrupted stretch of the server's command queue, so
   either both happen or neither does (a client killed while streaming stdin leaves nothing typed
   and no record). The submit is a separate Enter after the agent's delay, timed inside the server.

   Why the Enter is a *background* ``run-shell -C``: a foreground ``run-shell -d D ; send-keys
   Enter`` belongs to the client's queue, and when the client process dies during the delay (a
   worker killed mid-delivery) tmux drops the rest of the queue -- measured: the text stays typed,
   the record is set, the Enter never comes, and the retry (seeing the record) types nothing, so
   the message would sit unsubmitted. A background command belongs to the server and fires anyway.
   The foreground ``run-shell -d`` (a little longer) keeps the client waiting until the Enter has
   gone, so the next delivery cannot type into the pane before this one is submitted.

Once a target's pane id is known, a delivery is one invocation, the probe's checks made by the
server in the same stretch as the typing (``if-shell -F``, no shell)::

    show-options -p -t TARGET remain-on-exit ; strict: the target still exists
    load-buffer -b NAME - ;                    the text, on stdin
    if-shell -F -t TARGET "the target is still %7, alive, and EVT is not in its record"
        "copy-mode … ; paste-buffer … -t %7 ; set-option … ; run-shell … ;   (as above)
         display-message -p 'agentcomms-typed EVT'"
        "delete-buffer -b NAME"

A delivery that asks for a look (``Typing.look``) adds to that condition the checks of
:mod:`.look` (no dialog, copy mode, running turn or shell), so a pane that is not ready types
nothing and the delivery raises ``PaneNotReady``: the message waits. Under the looks that mind
the human's draft, the agent's input box is read first (one more invocation, with the probe),
unless it was read empty and tmux can tell, in the same condition, that nobody could have
written there since (``BoxSeenEmpty``).

Untrusted text never enters a command string tmux parses: it travels in the buffer, and short
single-line text is pasted without brackets, which gives the program the same bytes as typing
it. When the second branch runs (a new pane at the target, a dead one, or an event typed
already), the two-invocation path decides, as for a first delivery.

A backlog types several short texts in one invocation: each is a ``set-buffer -b NAME -- TEXT``
(an argument is not parsed either, bar a final ``;``) followed by its own ``if-shell`` as above,
so each is checked, typed, recorded and submitted in turn, and the output names those typed. The
whole invocation must stay under the 16 KB a tmux client may send its server (longer text goes
alone, on stdin).

tmux parses only one thing in an argument it is handed: a final ``;`` is a command separator, even
after ``-l`` (``"a;"`` arrives as ``a``). A final ``;`` is therefore sent as ``\\;``, which tmux turns
back into ``;``. ``-l`` makes every character literal (``C-c`` and ``Enter`` arrive as those letters)
and ``--`` stops a leading ``-`` from being read as an option. Measured on tmux 3.3a; needs a
tmux with ``run-shell -C`` and ``copy-mode -q``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid

from agentcomms.bridge.checks import check_event_id, check_interrupt_key, check_pane
from agentcomms.bridge.client import run_client
from agentcomms.bridge.commands import command_string, literal, sequence, weight
from agentcomms.bridge.look import (
    DRAFT_LOOKS,
    PRESSED_OPTION,
    TRUSTING_LOOKS,
    BoxSeenEmpty,
    PaneInfo,
    all_of,
    box_seen_empty,
    crashed_to_shell,
    draft_in_box,
    ready_conditions,
)
from agentcomms.bridge.probe import (
    LAST_EVENT_OPTION,
    RECENT_EVENTS_OPTION,
    probe_commands,
    read_probe,
    strictly,
)
from agentcomms.bridge.sanitize import CleanText, sanitize
from agentcomms.errors import BridgeError, InvalidTarget, PaneNotFound, PaneNotReady
from agentcomms.models import DeliveryOutcome, Keypress, PaneTarget, Typing

# About a thousand typical ids ("evt_" + ULID): far more than one workflow task's worth of
# deliveries, and small enough to read on every delivery (~0.5 ms).
RECENT_EVENTS_CHARS = 32_000

# Longer text is pasted: send-keys fails near 64 KB ("command too long"), and one paste is one
# event to the program where a thousand keystrokes are a thousand.
SEND_KEYS_MAX_CHARS = 1000

# What one invocation may carry, texts included: tmux sends a client's whole command to the
# server in one message, and refuses one past 16 KB ("command too long", measured on tmux 3.3a).
INVOCATION_BYTES = 14_000
# Longer texts go one to an invocation, on stdin.
SHARED_TEXT_BYTES = 4_000

# How much longer the client waits than the background Enter: timers due at the same instant may
# fire in either order, and the client must not return before the Enter is pressed.
_ENTER_MARGIN_S = 0.01

_TYPED = "agentcomms-typed"


class TmuxAdapter:
    """Types into tmux panes on the server at each target's socket (the default server if None)."""

    def __init__(self, *, tmux: str = "tmux", timeout: float = 5.0) -> None:
        self._tmux = tmux
        # On top of the submit delay. A wedged server must not hold a worker slot forever.
        self._timeout = timeout
        # (socket, target) -> the pane id the last probe resolved it to: lets a delivery check
        # and type in one invocation. A stale entry only sends a delivery the long way.
        self._pane_ids: dict[tuple[str | None, str], str] = {}
        # (socket, target) -> the agent's input box as last read empty, while it may be trusted.
        self._boxes: dict[tuple[str | None, str], BoxSeenEmpty] = {}

    async def deliver(self, req: Typing) -> DeliveryOutcome:
        """Type `req.text` (sanitized, capped) and submit it with Enter, at most once per event."""
        clean, outcome = _prepared(req)
        if req.look != "none" and clean.text:
            return await self._deliver_looking(req, clean.text, outcome)
        known = self._pane_ids.get((req.pane.socket, req.pane.target))
        if (
            known is not None
            and clean.text
            and await self._type_if_new(req.pane, known, [(req, clean.text)])
        ):
            return outcome

        info = await self.pane_info(req.pane)
        if info.has_seen(req.event_id):
            return outcome.model_copy(update={"typed": False})

        pane = info.pane_id
        record = _record(pane, req.event_id)
        if not clean.text:
            # Nothing survived sanitizing. A bare Enter could answer a prompt the human never
            # saw, so press nothing; only record that the event is done.
            await self._run(req.pane.socket, sequence(record))
            return outcome

        stdin: bytes | None = None
        commands: list[list[str]] = [["copy-mode", "-q", "-t", pane]]
        if _pasted(clean.text):
            buffer = _buffer_name()
            stdin = clean.text.encode("utf-8")
            commands.insert(0, ["load-buffer", "-b", buffer, "-"])
            commands.append(_paste(buffer, pane, bracketed=True))
        else:
            commands.append(["send-keys", "-t", pane, "-l", "--", literal(clean.text)])
        commands.extend(record)  # right after the text: the two must not be separable
        commands.extend(_submit(pane, req.submit_delay_ms))
        delay = req.submit_delay_ms / 1000
        await self._run(req.pane.socket, sequence(commands), stdin=stdin, extra_time=delay)
        return outcome

    async def _deliver_looking(
        self, req: Typing, text: str, outcome: DeliveryOutcome
    ) -> DeliveryOutcome:
        """Type only if the pane looks ready, tmux checking the look in the same stretch as the
        typing; PaneNotReady (nothing typed) when it does not. The input box is read first,
        unless tmux can tell nobody wrote in it since it was last read empty."""
        looked = False
        for attempt in range(2):
            if not looked and (attempt or not self._box_trusted(req)):
                await self._refuse_unseen_in_use(req)
                looked = True
            known = self._pane_ids.get((req.pane.socket, req.pane.target))
            if known is not None and await self._type_if_new(req.pane, known, [(req, text)]):
                return outcome
            # Not typed, or the pane not known yet: the probe says why (or learns the pane).
            info = await self.pane_info(req.pane)
            if info.has_seen(req.event_id):
                return outcome.model_copy(update={"typed": False})
            if (refused := info.not_ready(req.look)) is not None:
                raise refused
        raise PaneNotReady(
            "the pane changed while it was being typed into; trying again", reason="dialog"
        )

    async def _refuse_unseen_in_use(self, req: Typing) -> None:
        """PaneNotReady when the pane is in the human's or nobody's use, for an event not typed
        there yet: the human's words in the input box (a prompt Esc put back there, which no
        hook says, or one the human is writing while the agent is ready or still busy, its Stop
        then coming with their text in the box: typed after it, the message would join their
        words and Enter would submit both), or, under the look `alive`, an agent crashed to its
        shell (read from /proc). Neither is a tmux format: read them before the typing."""
        if req.look not in DRAFT_LOOKS:
            return
        key = (req.pane.socket, req.pane.target)
        self._boxes.pop(key, None)
        before = int(time.time())
        info, screen = await self._look(req.pane, screen=True)
        if info.has_seen(req.event_id):
            return
        if (refused := info.not_ready(req.look)) is not None:
            raise refused
        if req.look == "alive" and (
            refused := await asyncio.to_thread(crashed_to_shell, info.command, info.pid)
        ):
            raise refused  # the agent is gone: its screen is the shell's
        if refused := draft_in_box(screen):
            raise refused
        if req.look in TRUSTING_LOOKS:
            box = box_seen_empty(info, before=before, read_at=time.monotonic())
            if box is not None:
                self._boxes[key] = box

    def _box_trusted(self, req: Typing) -> bool:
        """Whether the agent's input box, read empty before, may go unread for this delivery
        (tmux still checks, as it types, that nobody could have written there since)."""
        key = (req.pane.socket, req.pane.target)
        box = self._boxes.get(key)
        return (
            req.look in TRUSTING_LOOKS
            and box is not None
            and box.trusted(self._pane_ids.get(key), time.monotonic())
        )

    async def deliver_batch(self, reqs: list[Typing]) -> list[DeliveryOutcome]:
        """Type several events into one pane, in order, each at most once.

        Once the pane is known, as many short texts as one invocation carries are typed in it: a
        backlog costs one tmux client, not one per message. The rest, and any that invocation
        did not type, go one at a time. Answers for the first events, in order, as many as
        were typed or found typed; raises only when the first one fails (whoever sends the rest
        again meets that failure with its own message first)."""
        prepared: list[tuple[Typing, CleanText, DeliveryOutcome]] = []
        for req in reqs:
            if req.pane != reqs[0].pane:
                break  # a batch is typed into one pane: the rest go with the next
            try:
                prepared.append((req, *_prepared(req)))
            except InvalidTarget:
                if not prepared:
                    raise
                break
        if prepared and not self._box_trusted(prepared[0][0]):
            await self._refuse_unseen_in_use(prepared[0][0])  # the short texts are not looked at
        typed: set[str] = set()
        outcomes: list[DeliveryOutcome] = []
        for i, (req, _, outcome) in enumerate(prepared):
            known = self._pane_ids.get((req.pane.socket, req.pane.target))
            if req.event_id not in typed and known is not None:
                short = _short_texts(prepared[i:])
                if len(short) > 1:
                    with contextlib.suppress(BridgeError):  # one at a time finds out what was typed
                        typed |= await self._type_if_new(req.pane, known, short)
            if req.event_id in typed:
                outcomes.append(outcome)
                continue
            try:
                outcomes.append(await self.deliver(req))
            except BridgeError:
                if not outcomes:
                    raise
                break
        return outcomes

    async def _type_if_new(
        self, target: PaneTarget, pane: str, texts: list[tuple[Typing, str]]
    ) -> set[str]:
        """Type the texts into `pane`, in order, in one invocation (as many as it carries), each
        if the target still is that live pane and the event is not in its record; the ids of
        the events typed."""
        commands = [strictly(target.target)]
        key = (target.socket, target.target)
        box = self._boxes.get(key)
        untouched = box.conditions() if box is not None and box.pane_id == pane else []
        size = weight(commands)
        stdin: bytes | None = None
        delay_ms = 0
        included = 0
        for req, text in texts:
            buffer = _buffer_name()
            if len(texts) == 1:
                # Any length: stdin carries what a command could not.
                stdin = text.encode("utf-8")
                load = ["load-buffer", "-b", buffer, "-"]
            else:
                load = ["set-buffer", "-b", buffer, "--", literal(text)]
            ids = [req.event_id, *req.also_ids]
            typing = [
                ["copy-mode", "-q", "-t", pane],
                _paste(buffer, pane, bracketed=_pasted(text)),
                *(command for event_id in ids for command in _record(pane, event_id)),
                *_submit(pane, req.submit_delay_ms),
                ["display-message", "-p", f"{_TYPED} {req.event_id}"],
            ]
            # pane_id and event id are checked ("%N", no '#', spaces or quotes): safe to parse.
            new_here = all_of(
                f"#{{==:#{{pane_id}},{pane}}}",
                "#{!=:#{pane_dead},1}",
                *(
                    f"#{{?#{{m:* {event_id} *, #{{{RECENT_EVENTS_OPTION}}}}},0,1}}"
                    for event_id in ids
                ),
                *ready_conditions(req.look),
                *(untouched if req.look in TRUSTING_LOOKS else []),
            )
            branches = [command_string(typing), f"delete-buffer -b {buffer}"]
            item = [load, ["if-shell", "-F", "-t", target.target, new_here, *branches]]
            size += weight(item)
            if included and size > INVOCATION_BYTES:
                break
            commands.extend(item)
            delay_ms += req.submit_delay_ms
            included += 1
        try:
            out = await self._run(
                target.socket, sequence(commands), stdin=stdin, extra_time=delay_ms / 1000
            )
        except BridgeError:
            self._forget(key)
            raise
        typed = {line.split(" ", 1)[1] for line in out.splitlines() if line.startswith(_TYPED)}
        if len(typed) < included:
            # A new pane at the target, a dead one, an event typed already, or someone at the
            # input box: the probe decides, and the box is read again.
            self._forget(key)
        return typed

    def _forget(self, key: tuple[str | None, str]) -> None:
        self._pane_ids.pop(key, None)
        self._boxes.pop(key, None)

    async def interrupt(self, req: Keypress) -> bool:
        """Press the agent's interrupt key once per event; False if this event already pressed it."""
        check_interrupt_key(req.key)
        check_pane(req.pane)
        check_event_id(req.event_id)
        info = await self.pane_info(req.pane)
        if info.has_seen(req.event_id):
            return False
        pane = info.pane_id
        commands = [
            # In copy mode C-c would only leave the mode; the agent must get the key.
            ["copy-mode", "-q", "-t", pane],
            ["send-keys", "-t", pane, req.key],
            *_record(pane, req.event_id),
            # Esc puts Claude Code's cancelled prompt back in its box: read it before typing.
            ["set-option", "-p", "-t", pane, PRESSED_OPTION, req.event_id],
        ]
        self._boxes.pop((req.pane.socket, req.pane.target), None)
        await self._run(req.pane.socket, sequence(commands))
        return True

    async def exists(self, pane: PaneTarget) -> bool:
        """True when the pane is there and its program is still running."""
        try:
            await self.pane_info(pane)
        except PaneNotFound:
            return False
        return True

    async def pane_info(self, pane: PaneTarget) -> PaneInfo:
        """Resolve `pane` strictly and read its markers; PaneNotFound if it is gone or dead."""
        return (await self._look(pane, screen=False))[0]

    async def screen(self, pane: PaneTarget) -> str:
        """What the pane shows, its markers read in the same invocation; PaneNotFound if it is
        gone or dead."""
        return (await self._look(pane, screen=True))[1]

    async def _look(self, pane: PaneTarget, *, screen: bool) -> tuple[PaneInfo, str]:
        """The pane's markers and, with `screen`, what it shows, read in one tmux invocation
        (each invocation is a process: about 2 ms before a message is typed)."""
        check_pane(pane)
        out = await self._run(pane.socket, sequence(probe_commands(pane.target, screen=screen)))
        info, dead, shown = read_probe(out, pane.target)
        key = (pane.socket, pane.target)
        self._pane_ids[key] = info.pane_id
        if dead:
            del self._pane_ids[key]
            # remain-on-exit keeps a pane whose program has ended; text typed there is lost.
            raise PaneNotFound(
                f"tmux pane {pane.target!r} ({info.pane_id}) is dead: its program exited"
            )
        return info, shown

    async def run_commands(self, socket: str | None, commands: list[list[str]]) -> str:
        """Run commands as one invocation on the server at `socket`; their output."""
        return await self._run(socket, sequence(commands))

    async def default_server_socket(self) -> str | None:
        """The socket of the server a bare `tmux` reaches from this process: the one in $TMUX
        when run inside tmux, else the default one. None when no server answers there."""
        try:
            out = await self._run(None, ["display-message", "-p", "#{socket_path}"])
        except BridgeError:
            return None
        return out.strip() or None

    async def _run(
        self,
        socket: str | None,
        args: list[str],
        *,
        stdin: bytes | None = None,
        extra_time: float = 0.0,
    ) -> str:
        """Run one tmux client; return its stdout, or raise PaneNotFound / TmuxError."""
        return await run_client(
            self._tmux, socket, args, stdin=stdin, timeout=self._timeout + extra_time
        )


def _prepared(req: Typing) -> tuple[CleanText, DeliveryOutcome]:
    """Check the request; the text as it will be typed, and the outcome of typing it."""
    check_pane(req.pane)
    check_event_id(req.event_id)
    if req.submit_delay_ms < 0:
        raise InvalidTarget(f"submit_delay_ms must be 0 or more, not {req.submit_delay_ms}")
    if req.max_chars < 1:
        raise InvalidTarget(f"max_chars must be at least 1, not {req.max_chars}")
    clean = sanitize(req.text, max_chars=req.max_chars)
    outcome = DeliveryOutcome(
        event_id=req.event_id,
        typed=True,
        truncated=clean.truncated,
        chars=len(clean.text),
        removed=clean.removed,
    )
    return clean, outcome


def _short_texts(
    prepared: list[tuple[Typing, CleanText, DeliveryOutcome]],
) -> list[tuple[Typing, str]]:
    """The first texts short enough to share an invocation (an empty one is not typed at all:
    it goes the one-at-a-time way, which only records it)."""
    short: list[tuple[Typing, str]] = []
    for req, clean, _ in prepared:
        if not clean.text or len(clean.text.encode("utf-8")) > SHARED_TEXT_BYTES:
            break
        short.append((req, clean.text))
    return short


def _pasted(text: str) -> bool:
    """Whether text goes in as a (bracketed, where asked) paste rather than as keystrokes."""
    return len(text) > SEND_KEYS_MAX_CHARS or "\n" in text or "\t" in text


def _buffer_name() -> str:
    return f"agentcomms-{uuid.uuid4().hex}"


def _paste(buffer: str, pane: str, *, bracketed: bool) -> list[str]:
    # -p: bracketed when the program asked for it; -r: keep LF (tmux makes it CR otherwise,
    # i.e. Enter after every line); -d: delete the buffer afterwards.
    return ["paste-buffer", *(["-p"] if bracketed else []), "-r", "-d", "-b", buffer, "-t", pane]


def _submit(pane: str, submit_delay_ms: int) -> list[list[str]]:
    """Commands that press Enter in `pane` after the delay, and keep the client until then."""
    delay = submit_delay_ms / 1000
    if not delay:
        return [["send-keys", "-t", pane, "Enter"]]
    enter = f"send-keys -t {pane} Enter"  # pane is a checked "%N": safe to parse
    return [
        ["run-shell", "-b", "-C", "-d", f"{delay:.3f}", enter],
        ["run-shell", "-d", f"{delay + _ENTER_MARGIN_S:.3f}"],
    ]


def _record(pane: str, event_id: str) -> list[list[str]]:
    """Commands that record `event_id` as done in `pane` (the id is checked: no '#', no spaces)."""
    window = f"{event_id} #{{={RECENT_EVENTS_CHARS}:{RECENT_EVENTS_OPTION}}}"
    return [
        ["set-option", "-p", "-t", pane, LAST_EVENT_OPTION, event_id],
        ["set-option", "-F", "-p", "-t", pane, RECENT_EVENTS_OPTION, window],
    ]
