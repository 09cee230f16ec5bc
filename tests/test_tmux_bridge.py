"""The tmux bridge against a real tmux server on a private socket.

Most checks use a recorder pane, ``stty raw -echo; exec cat >> FILE``: the file holds exactly the
bytes typed into the pane (CR for Enter, 0x03 for C-c…), so assertions are on bytes, not on a
rendering of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
from pathlib import Path

import pytest

from agentcomms.bridge import (
    Adapter,
    BridgeError,
    InvalidTarget,
    PaneNotFound,
    TmuxAdapter,
    TmuxError,
    adapter_for,
    sanitize,
)
from agentcomms.bridge import tmux as tmux_bridge
from agentcomms.bridge.checks import socket_path
from agentcomms.bridge.probe import LAST_EVENT_OPTION, RECENT_EVENTS_OPTION
from agentcomms.bridge.sanitize import TRUNCATION_MARKER, truncate
from agentcomms.bridge.tmux import SEND_KEYS_MAX_CHARS
from agentcomms.framing import strip_unsafe
from agentcomms.models import DeliveryOutcome, Keypress, PaneTarget, Typing
from tests.support.tmux import Recorder, Tmux, start_recorder, wait_for_command

ENTER = b"\r"


# --- helpers -------------------------------------------------------------------------------------


class KnownPaneAdapter(TmuxAdapter):
    """Probes a pane before typing into it, so every delivery takes the one-invocation path
    that a pane already typed into gets."""

    async def deliver(self, req: Typing) -> DeliveryOutcome:
        with contextlib.suppress(BridgeError):
            await self.pane_info(req.pane)
        return await super().deliver(req)


@pytest.fixture(params=["first delivery", "known pane"])
def adapter(request: pytest.FixtureRequest) -> TmuxAdapter:
    return KnownPaneAdapter() if request.param == "known pane" else TmuxAdapter()


_counter = iter(range(1_000_000))


def request(pane: PaneTarget, text: str, **kw: object) -> Typing:
    fields: dict[str, object] = {"event_id": f"evt_test{next(_counter)}", "submit_delay_ms": 20}
    fields.update(kw)
    return Typing(pane=pane, text=text, **fields)


# --- sanitizing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("\x1b[31mred\x1b[0m", "red"),
        ("\x1b[1;38;5;196mbold\x1b[m", "bold"),
        ("\x1b]0;title\x07after", "after"),
        ("\x1b]8;;https://x.example\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("\x1bP1$r0m\x1b\\dcs", "dcs"),
        ("\x1b_apc\x9cafter", "after"),
        ("\x9b2Jcleared", "cleared"),  # 8-bit CSI
        ("\x1b(Bcharset \x1b7save \x1bcreset", "charset save reset"),
        ("\x1bOPf1", "f1"),  # SS3 takes its one character
        ("bracket \x1b[201~escape", "bracket escape"),  # cannot end a bracketed paste early
        ("osc \x1b]unterminated\nnext line", "osc \nnext line"),
        ("lone esc\x1b", "lone esc"),
        (
            "nul\x00 bel\x07 bs\x08 vt\x0b ff\x0c so\x0e us\x1f del\x7f c1\x85\x9f",
            "nul bel bs vt ff so us del c1",
        ),
        ("crlf\r\nand cr\rend", "crlf\nand cr\nend"),
        ("tab\tkept\nnewline kept", "tab\tkept\nnewline kept"),
        ("rlo \u202eevil\u202c lri \u2066x\u2069", "rlo evil lri x"),
        ("marks kept: \u200ea\u200f\u061c", "marks kept: \u200ea\u200f\u061c"),
        ("surrogate \ud800 gone", "surrogate  gone"),
        ("trailing newlines\n\n\r\n", "trailing newlines"),
    ],
)
def test_sanitize_strips_what_a_terminal_would_obey(raw: str, clean: str) -> None:
    assert sanitize(raw, max_chars=1000).text == clean


def test_sanitize_keeps_ordinary_text_exactly() -> None:
    text = 'é 日本 😀 👍🏽 👨‍👩‍👧 it\'s "q" $HOME `id` \\; C-c Enter -- ; #{pane_id} ~ 100%'
    assert strip_unsafe(text) == text
    assert sanitize(text, max_chars=1000).text == text


@pytest.mark.parametrize("length", [101, 150, 1000, 123_456])
def test_truncate_fits_the_cap_and_says_how_much_was_cut(length: int) -> None:
    cut = truncate("x" * length, 100)
    assert cut.truncated
    assert len(cut.text) == 100
    kept = cut.text.index("…")
    assert cut.removed == length - kept
    assert cut.text.endswith(TRUNCATION_MARKER.format(removed=length - kept))


def test_truncate_leaves_text_within_the_cap_alone() -> None:
    assert truncate("x" * 100, 100).text == "x" * 100
    assert not truncate("x" * 100, 100).truncated


# --- typing text ---------------------------------------------------------------------------------

LITERAL_TEXTS = {
    "unicode": "é 日本 😀 👍🏽 👨‍👩‍👧 ❤️ e\u0301",
    "quotes": "it's \"double\" and 'single'",
    "dollar": "$HOME ${PATH} $(whoami)",
    "backticks": "`id` and ``two``",
    "leading dash": "-n hello",
    "double dash": "--",
    "dash only": "-",
    "trailing semicolon": "semi;",
    "only semicolon": ";",
    "two semicolons": ";;",
    "trailing semicolons after text": "a;;",
    "escaped semicolon": "\\;",
    "text then escaped semicolon": "a\\;",
    "inner semicolon": "a; b",
    "key name C-c": "C-c",
    "key name Enter": "Enter",
    "key name Escape": "Escape",
    "key names": "C-c Enter Escape M-x F1 BSpace ^C",
    "backslashes": "C:\\path\\n \\",
    "tmux formats": "#{pane_id} #[fg=red] #(id) %1",
    "braces": "{ } {a}",
    "at the send-keys limit": "y" * SEND_KEYS_MAX_CHARS,
    "just over it (pasted)": "z" * (SEND_KEYS_MAX_CHARS + 1),
}


@pytest.mark.parametrize("text", LITERAL_TEXTS.values(), ids=LITERAL_TEXTS.keys())
async def test_text_arrives_exactly_then_enter(
    adapter: TmuxAdapter, recorder: Recorder, text: str
) -> None:
    outcome = await adapter.deliver(request(recorder.pane, text))
    assert outcome.typed and not outcome.truncated and outcome.chars == len(text)
    expected = text.encode() + ENTER
    assert await recorder.wait_for(expected) == expected


async def test_escape_sequences_and_controls_are_stripped(
    adapter: TmuxAdapter, recorder: Recorder
) -> None:
    text = "\x1b]0;title\x07\x1b[31mred\x1b[0m bell\x07 nul\x00 del\x7f \u202eend"
    await adapter.deliver(request(recorder.pane, text))
    expected = b"red bell nul del end" + ENTER
    assert await recorder.wait_for(expected) == expected


async def test_multiline_text_is_pasted_with_newlines_kept(
    adapter: TmuxAdapter, recorder: Recorder
) -> None:
    text = "line one\r\nline two;\n\tindented `x` $y\nlast;"
    await adapter.deliver(request(recorder.pane, text))
    expected = b"line one\nline two;\n\tindented `x` $y\nlast;" + ENTER
    assert await recorder.wait_for(expected) == expected


async def test_paste_is_bracketed_when_the_program_asked(
    adapter: TmuxAdapter, tmux: Tmux, tmp_path: Path
) -> None:
    rec = await start_recorder(tmux, tmp_path / "b.bin", bracketed=True)
    await adapter.deliver(request(rec.pane, "one\ntwo"))
    await adapter.deliver(request(rec.pane, "single"))  # typed, so never bracketed
    expected = b"\x1b[200~one\ntwo\x1b[201~" + ENTER + b"single" + ENTER
    assert await rec.wait_for(expected) == expected


async def test_text_over_the_cap_is_cut_with_a_marker(
    adapter: TmuxAdapter, recorder: Recorder
) -> None:
    outcome = await adapter.deliver(request(recorder.pane, "x" * 500, max_chars=100))
    assert outcome.truncated and outcome.chars == 100
    # 77 kept + the 23-character marker = the cap of 100; 500 - 77 = 423 cut.
    expected = ("x" * 77 + "… [truncated 423 chars]").encode() + ENTER
    assert await recorder.wait_for(expected) == expected


async def test_hundred_kilobytes_arrive_whole_with_a_big_cap(
    adapter: TmuxAdapter, recorder: Recorder
) -> None:
    line = "ünïcode 日本 'q' \"d\" $HOME `b` ; -- C-c\n"
    text = (line * (100_000 // len(line) + 1))[:100_000].rstrip("\n")
    outcome = await adapter.deliver(request(recorder.pane, text, max_chars=200_000))
    assert outcome.typed and not outcome.truncated
    expected = text.encode() + ENTER
    assert await recorder.wait_for(expected, within=30) == expected


async def test_plain_cat_pane_shows_the_text(adapter: TmuxAdapter, tmux: Tmux) -> None:
    target = tmux.new_session("cat", "cat")
    await wait_for_command(tmux, target, "cat")
    text = "héllo 日本 'q' \"d\" $HOME `x` -- C-c;"
    await adapter.deliver(request(PaneTarget(target=target, socket=tmux.socket), text))
    for _ in range(500):  # the terminal echoes the line, then cat prints it back
        if tmux.capture(target).splitlines() == [text, text]:
            break
        await asyncio.sleep(0.01)
    assert tmux.capture(target).splitlines() == [text, text]


async def test_enter_is_a_separate_key_after_the_delay(
    adapter: TmuxAdapter, recorder: Recorder
) -> None:
    task = asyncio.create_task(adapter.deliver(request(recorder.pane, "wait", submit_delay_ms=800)))
    assert await recorder.wait_for(b"wait") == b"wait"
    await asyncio.sleep(0.3)
    assert recorder.read() == b"wait", "Enter came before the submit delay"
    await task
    assert recorder.read() == b"wait" + ENTER  # the call returns only once Enter is pressed


async def test_no_delay_presses_enter_straight_away(
    adapter: TmuxAdapter, recorder: Recorder
) -> None:
    await adapter.deliver(request(recorder.pane, "now", submit_delay_ms=0))
    assert await recorder.wait_for(b"now" + ENTER) == b"now" + ENTER


async def test_text_that_sanitizes_to_nothing_presses_nothing(
    adapter: TmuxAdapter, recorder: Recorder
) -> None:
    req = request(recorder.pane, "\x1b[0m\x07\r\n")
    outcome = await adapter.deliver(req)
    assert outcome.typed and outcome.chars == 0
    assert await recorder.settled() == b""
    assert not (await adapter.deliver(req)).typed  # still recorded as done


async def test_pane_in_copy_mode_still_gets_the_text(
    adapter: TmuxAdapter, tmux: Tmux, recorder: Recorder
) -> None:
    tmux.run("copy-mode", "-t", recorder.pane.target)
    await adapter.deliver(request(recorder.pane, "scrolling"))
    assert await recorder.wait_for(b"scrolling" + ENTER) == b"scrolling" + ENTER
    assert tmux.run("display", "-p", "-t", recorder.pane.target, "#{pane_in_mode}").stdout == "0\n"


# --- at most once --------------------------------------------------------------------------------


async def test_same_event_is_typed_once(adapter: TmuxAdapter, recorder: Recorder) -> None:
    req = request(recorder.pane, "only once")
    first, second = await adapter.deliver(req), await adapter.deliver(req)
    assert first.typed and not second.typed
    assert second.chars == first.chars
    await adapter.deliver(request(recorder.pane, "next"))
    assert await recorder.settled() == b"only once" + ENTER + b"next" + ENTER


async def test_multiline_event_is_pasted_once(adapter: TmuxAdapter, recorder: Recorder) -> None:
    req = request(recorder.pane, "a\nb")
    assert (await adapter.deliver(req)).typed
    assert not (await adapter.deliver(req)).typed
    assert await recorder.settled() == b"a\nb" + ENTER


async def test_the_record_is_kept_in_pane_options(
    adapter: TmuxAdapter, tmux: Tmux, recorder: Recorder
) -> None:
    await adapter.deliver(request(recorder.pane, "x", event_id="evt_01J0FIRST"))
    await adapter.interrupt(Keypress(pane=recorder.pane, event_id="evt_01J0INT"))
    await adapter.deliver(request(recorder.pane, "y", event_id="evt_01J0LAST"))

    def option(name: str) -> str:
        return tmux.run("show-options", "-p", "-v", "-t", recorder.pane.target, name).stdout

    assert option(LAST_EVENT_OPTION) == "evt_01J0LAST\n"
    assert option(RECENT_EVENTS_OPTION) == "evt_01J0LAST evt_01J0INT evt_01J0FIRST \n"
    info = await adapter.pane_info(recorder.pane)
    assert info.recent_events == ("evt_01J0LAST", "evt_01J0INT", "evt_01J0FIRST")


async def test_a_replayed_run_of_events_is_not_typed_again(
    adapter: TmuxAdapter, recorder: Recorder
) -> None:
    """A lost workflow task re-runs every local activity since the last completed one, in order."""
    events = [request(recorder.pane, f"m{i}", submit_delay_ms=0) for i in range(40)]
    for req in events:
        assert (await adapter.deliver(req)).typed
    for req in events:
        assert not (await adapter.deliver(req)).typed
    assert await recorder.settled() == b"".join(f"m{i}\r".encode() for i in range(40))


async def test_the_window_forgets_the_oldest_and_never_matches_a_fragment(
    adapter: TmuxAdapter, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With a 5-character window, "evt_12 " is trimmed to "evt_1": that fragment must not make
    # the different event "evt_1" look typed.
    monkeypatch.setattr(tmux_bridge, "RECENT_EVENTS_CHARS", 5)
    await adapter.deliver(request(recorder.pane, "a", event_id="evt_12", submit_delay_ms=0))
    await adapter.deliver(request(recorder.pane, "b", event_id="evt_x", submit_delay_ms=0))
    assert (await adapter.pane_info(recorder.pane)).recent_events == ("evt_x",)
    assert (await adapter.deliver(request(recorder.pane, "c", event_id="evt_1"))).typed
    assert await recorder.settled() == b"a\rb\rc\r"


async def test_worker_dying_during_the_delay_still_submits_once(
    adapter: TmuxAdapter, recorder: Recorder
) -> None:
    """Cancelling the delivery kills its tmux client mid-delay, as a worker's death would."""
    req = request(recorder.pane, "half way", submit_delay_ms=700)
    task = asyncio.create_task(adapter.deliver(req))
    assert await recorder.wait_for(b"half way") == b"half way"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The Enter was handed to the server, not to the dead client: it still comes.
    assert await recorder.wait_for(b"half way" + ENTER) == b"half way" + ENTER
    retry = await adapter.deliver(req)
    assert not retry.typed
    assert await recorder.settled() == b"half way" + ENTER


async def test_a_new_pane_at_a_known_target_gets_the_next_message(
    tmux: Tmux, tmp_path: Path
) -> None:
    """The pane an adapter typed into is replaced by another under the same name: the next
    message goes to the new pane, once, and nothing to the old one."""
    adapter = TmuxAdapter()
    tmux.new_session("keep")  # the server lives on between the two: its last session ending ends it
    old = await start_recorder(tmux, tmp_path / "old.bin", name="agent")
    await adapter.deliver(request(old.pane, "to the old pane"))
    tmux.run("kill-session", "-t", "agent")
    new = await start_recorder(tmux, tmp_path / "new.bin", name="agent")
    assert new.pane == old.pane  # same socket and target, another pane behind them
    req = request(new.pane, "to the new pane")
    assert (await adapter.deliver(req)).typed
    assert not (await adapter.deliver(req)).typed
    assert await new.settled() == b"to the new pane" + ENTER
    assert old.read() == b"to the old pane" + ENTER


async def test_an_id_inside_another_is_not_mistaken_for_it(
    adapter: TmuxAdapter, recorder: Recorder
) -> None:
    """Ids derived from provider message ids differ in length: "tg-1-2" is the tail of "tg-1-12"."""
    for event_id, text in [("tg-1-12", "twelve"), ("tg-1-2", "two"), ("1-12", "tail")]:
        assert (await adapter.deliver(request(recorder.pane, text, event_id=event_id))).typed
    assert await recorder.settled() == b"twelve" + ENTER + b"two" + ENTER + b"tail" + ENTER


# --- a backlog typed in batches ------------------------------------------------------------------


def counting_adapter(tmp_path: Path) -> tuple[TmuxAdapter, Path]:
    """An adapter whose every tmux client leaves a line in the returned log first."""
    log = tmp_path / "clients.log"
    wrapper = tmp_path / "tmux-counted"
    wrapper.write_text(f'#!/bin/sh\necho client >> {shlex.quote(str(log))}\nexec tmux "$@"\n')
    wrapper.chmod(0o755)
    return TmuxAdapter(tmux=str(wrapper)), log


def clients(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


async def test_a_backlog_is_typed_whole_in_order_in_one_client(
    recorder: Recorder, tmp_path: Path
) -> None:
    adapter, log = counting_adapter(tmp_path)
    await adapter.pane_info(recorder.pane)  # a pane typed into before: its id is known
    texts = [*LITERAL_TEXTS.values(), "two\nlines;", "tab\there"]
    texts = [t for t in texts if len(t) < 1000]
    reqs = [request(recorder.pane, t, submit_delay_ms=0) for t in texts]
    before = clients(log)
    outcomes = await adapter.deliver_batch(reqs)
    assert clients(log) - before == 1
    assert [o.event_id for o in outcomes] == [r.event_id for r in reqs]
    assert all(o.typed and o.chars == len(t) for o, t in zip(outcomes, texts, strict=True))
    expected = b"".join(t.encode() + ENTER for t in texts)
    assert await recorder.wait_for(expected) == expected
    # Each is in the pane's record, as if typed alone: none is typed again.
    again = await adapter.deliver_batch(reqs)
    assert [o.typed for o in again] == [False] * len(reqs)
    assert await recorder.settled() == expected


async def test_a_batch_past_what_one_client_carries_still_arrives_whole(
    recorder: Recorder, tmp_path: Path
) -> None:
    adapter, log = counting_adapter(tmp_path)
    await adapter.pane_info(recorder.pane)
    texts = [f"{i}:" + "q" * 3000 for i in range(6)] + ["x" * 20_000, "last"]
    reqs = [request(recorder.pane, t, submit_delay_ms=0) for t in texts]
    outcomes = await adapter.deliver_batch(reqs)
    assert [o.typed for o in outcomes] == [True] * len(texts)
    expected = b"".join(t.encode() + ENTER for t in texts)
    assert await recorder.wait_for(expected) == expected
    assert clients(log) < 1 + len(texts)  # the short ones went several together


async def test_a_replayed_batch_types_only_what_it_had_not(
    adapter: TmuxAdapter, recorder: Recorder
) -> None:
    """A batch cut short (a worker died during a submit delay) runs again whole."""
    reqs = [request(recorder.pane, f"b{i}", submit_delay_ms=0) for i in range(5)]
    await adapter.deliver(reqs[0])
    await adapter.deliver(reqs[2])
    outcomes = await adapter.deliver_batch(reqs)
    assert [o.typed for o in outcomes] == [False, True, False, True, True]
    assert await recorder.settled() == b"b0\rb2\rb1\rb3\rb4\r"


async def test_a_batch_submits_each_text_after_its_delay(
    adapter: TmuxAdapter, recorder: Recorder
) -> None:
    reqs = [request(recorder.pane, t, submit_delay_ms=80) for t in ("one", "two\nlines", "")]
    await adapter.pane_info(recorder.pane)
    outcomes = await adapter.deliver_batch(reqs)
    # Nothing survived sanitizing in the last: recorded, but no bare Enter.
    assert [(o.typed, o.chars) for o in outcomes] == [(True, 3), (True, 9), (True, 0)]
    assert await recorder.settled() == b"one\rtwo\nlines\r"
    assert (await adapter.pane_info(recorder.pane)).has_seen(reqs[2].event_id)


async def test_a_batch_to_a_missing_pane_raises_and_types_nowhere(
    adapter: TmuxAdapter, recorder: Recorder
) -> None:
    await adapter.deliver(request(recorder.pane, "first"))
    recorder_target = recorder.pane.target
    pane = PaneTarget(target="rec:0.5", socket=recorder.pane.socket)
    with pytest.raises(PaneNotFound):
        await adapter.deliver_batch([request(pane, "lost?"), request(pane, "lost too")])
    assert recorder_target != pane.target
    assert await recorder.settled() == b"first" + ENTER


async def test_a_batch_stops_at_a_request_that_can_never_be_typed(
    adapter: TmuxAdapter, recorder: Recorder
) -> None:
    good = request(recorder.pane, "good", submit_delay_ms=0)
    bad = request(recorder.pane, "bad", event_id="evt with spaces")
    outcomes = await adapter.deliver_batch([good, bad, request(recorder.pane, "after")])
    assert [o.event_id for o in outcomes] == [good.event_id]
    with pytest.raises(InvalidTarget):
        await adapter.deliver_batch([bad])
    assert await recorder.settled() == b"good" + ENTER


# --- missing panes and tmux failures -------------------------------------------------------------


@pytest.mark.parametrize("target", ["nosuch:0.0", "nosuch", "rec:7.0", "rec:0.5", "%999"])
async def test_missing_pane_raises_and_types_nowhere(
    adapter: TmuxAdapter, recorder: Recorder, target: str
) -> None:
    pane = PaneTarget(target=target, socket=recorder.pane.socket)
    with pytest.raises(PaneNotFound):
        await adapter.deliver(request(pane, "lost?"))
    with pytest.raises(PaneNotFound):
        await adapter.interrupt(Keypress(pane=pane, event_id="evt_i"))
    assert not await adapter.exists(pane)
    # display-message alone would have resolved "rec:7.0" to the recorder: nothing may land there.
    assert await recorder.settled() == b""


@pytest.mark.parametrize("socket_name", ["never-started", "plain-file"])
async def test_no_tmux_server_is_pane_not_found(
    adapter: TmuxAdapter, tmp_path: Path, socket_name: str
) -> None:
    socket = tmp_path / socket_name
    if socket_name == "plain-file":
        socket.write_text("not a socket")
    pane = PaneTarget(target="main:0.0", socket=str(socket))
    with pytest.raises(PaneNotFound) as caught:
        await adapter.deliver(request(pane, "hello"))
    assert str(caught.value).count(str(socket)) == 1  # names the server, once
    assert not await adapter.exists(pane)


async def test_dead_pane_is_pane_not_found(adapter: TmuxAdapter, tmux: Tmux) -> None:
    tmux.new_session("alive")
    tmux.run("set-option", "-g", "remain-on-exit", "on")
    target = tmux.new_session("dead", "true")
    for _ in range(500):
        if tmux.run("display", "-p", "-t", target, "#{pane_dead}").stdout == "1\n":
            break
        await asyncio.sleep(0.01)
    pane = PaneTarget(target=target, socket=tmux.socket)
    with pytest.raises(PaneNotFound, match="dead"):
        await adapter.deliver(request(pane, "hello"))
    assert not await adapter.exists(pane)


async def test_exists_and_pane_info(adapter: TmuxAdapter, recorder: Recorder) -> None:
    assert await adapter.exists(recorder.pane)
    info = await adapter.pane_info(recorder.pane)
    assert info.pane_id.startswith("%") and info.recent_events == ()


async def test_other_tmux_failures_are_tmux_errors(tmp_path: Path) -> None:
    long_socket = PaneTarget(target="main", socket=str(tmp_path / ("s" * 200)))
    with pytest.raises(TmuxError, match="File name too long") as caught:
        await TmuxAdapter().deliver(request(long_socket, "hello"))
    assert caught.value.returncode == 1 and "too long" in caught.value.stderr
    with pytest.raises(TmuxError, match="not installed"):
        await TmuxAdapter(tmux=str(tmp_path / "no-tmux")).exists(long_socket)


@pytest.mark.parametrize("target", ["", "   ", "main;", "ma\nin", "x" * 300])
async def test_unusable_targets_are_rejected(adapter: TmuxAdapter, target: str) -> None:
    with pytest.raises(InvalidTarget):
        await adapter.deliver(request(PaneTarget(target=target), "hello"))


@pytest.mark.parametrize("event_id", ["", "evt;", "evt 1", "-evt", "e" * 201, "evt\n"])
async def test_unusable_event_ids_are_rejected(
    adapter: TmuxAdapter, recorder: Recorder, event_id: str
) -> None:
    with pytest.raises(InvalidTarget, match="event id"):
        await adapter.deliver(request(recorder.pane, "hello", event_id=event_id))


# --- interrupts ----------------------------------------------------------------------------------


async def test_ctrl_c_stops_a_running_command(adapter: TmuxAdapter, tmux: Tmux) -> None:
    # No rc files: the machine's ~/.bashrc can stall (pyenv rehash waits on a lock) before a prompt.
    target = tmux.new_session("shell", "bash --norc --noprofile")
    pane = PaneTarget(target=target, socket=tmux.socket)
    # A starting shell may set up its terminal in a way that drops typeahead: wait for a prompt.
    for _ in range(500):
        if tmux.capture(target).strip():
            break
        await asyncio.sleep(0.01)
    await adapter.deliver(request(pane, "sleep 100"))
    await wait_for_command(tmux, target, "sleep")
    assert await adapter.interrupt(Keypress(pane=pane, event_id="evt_int1"))
    await wait_for_command(tmux, target, "sleep", present=False)


@pytest.mark.parametrize(
    ("key", "sent"),
    [
        ("C-c", b"\x03"),
        ("C-a", b"\x01"),
        ("Escape", b"\x1b"),
        ("M-x", b"\x1bx"),
        ("Enter", b"\r"),
        ("Tab", b"\t"),
    ],
)
async def test_interrupt_key_arrives(
    adapter: TmuxAdapter, recorder: Recorder, key: str, sent: bytes
) -> None:
    assert await adapter.interrupt(Keypress(pane=recorder.pane, event_id="evt_k", key=key))
    assert await recorder.wait_for(sent) == sent


async def test_same_interrupt_is_pressed_once(adapter: TmuxAdapter, recorder: Recorder) -> None:
    req = Keypress(pane=recorder.pane, event_id="evt_esc", key="Escape")
    assert await adapter.interrupt(req)
    assert not await adapter.interrupt(req)
    assert await recorder.settled() == b"\x1b"


async def test_interrupt_does_not_erase_the_delivery_marker(
    adapter: TmuxAdapter, recorder: Recorder
) -> None:
    """A retried message after an interrupt must still be recognised as typed."""
    message = request(recorder.pane, "msg")
    await adapter.deliver(message)
    await adapter.interrupt(Keypress(pane=recorder.pane, event_id="evt_int9"))
    assert not (await adapter.deliver(message)).typed
    assert await recorder.settled() == b"msg" + ENTER + b"\x03"


@pytest.mark.parametrize(
    "key",
    [
        "",
        "c",
        "C-C",
        "C-cEnter",
        "C-c Enter",
        "Enter;",
        ";",
        "F13",
        "F0",
        "M-xx",
        "Esc",
        "escape",
        "C-[",
        "Space",
        "BSpace",
        "-l",
        "C-c\n",
    ],
)
async def test_keys_outside_the_allowlist_are_refused(
    adapter: TmuxAdapter, recorder: Recorder, key: str
) -> None:
    with pytest.raises(ValueError, match="interrupt key"):
        await adapter.interrupt(Keypress(pane=recorder.pane, event_id="evt_bad", key=key))
    assert await recorder.settled(0.1) == b""


# --- the adapter registry ------------------------------------------------------------------------


def test_adapter_for_tmux_and_unknown_kinds() -> None:
    assert isinstance(adapter_for("tmux"), TmuxAdapter)
    assert isinstance(adapter_for("tmux"), Adapter)
    with pytest.raises(InvalidTarget, match="known: tmux"):
        adapter_for("carrier-pigeon")


@pytest.mark.parametrize(
    ("given", "tmpdir", "path"),
    [
        ("work", None, f"/tmp/tmux-{os.getuid()}/work"),  # as `tmux -L work`
        ("work", "/run/t", f"/run/t/tmux-{os.getuid()}/work"),
        ("/srv/tmux.sock", None, "/srv/tmux.sock"),  # as `tmux -S PATH`
        ("./here.sock", None, str(Path.cwd() / "here.sock")),  # the worker runs elsewhere
        ("~/t.sock", None, str(Path.home() / "t.sock")),
    ],
)
def test_a_socket_is_a_tmux_l_name_or_a_path(given: str, tmpdir: str | None, path: str) -> None:
    environ = {"TMUX_TMPDIR": tmpdir} if tmpdir else {}

    assert socket_path(given, environ) == path


def test_a_socket_with_control_characters_is_refused() -> None:
    with pytest.raises(InvalidTarget, match="not a usable tmux socket path"):
        socket_path("work\n")
