"""What the soak (bench/soak.py) calls a failure, from what was accepted and what the panes
show: lost, doubled, out of order, an approval answered twice or never closed. The soak itself
runs for minutes with its parts killed; its rules are checked here in milliseconds."""

from __future__ import annotations

import json
from pathlib import Path

from bench.soak import Ledger, Tally, problems, prompted, typed


def pane(tmp_path: Path, *texts: str) -> Path:
    """A recorder pane's bytes once these texts were typed, each behind its header."""
    path = tmp_path / "a0.bytes"
    path.write_bytes(b"".join(f"[from: cli] {t}\r".encode() for t in texts))
    return path


def found(tmp_path: Path, accepted: list[str], seen: list[str], **approvals: int) -> list[str]:
    ledger = Ledger()
    ledger.accepted["a0"] = accepted
    ledger.approvals.update(approvals)
    return problems(ledger, {"a0": typed(pane(tmp_path, *seen))}, open_approvals=["OPEN"])


def test_everything_accepted_typed_once_in_order_is_no_problem(tmp_path: Path) -> None:
    accepted = ["a0 cli 0", "a0 from a2 0", "a0 cli 1", "a0 from a2 1"]
    # Two senders interleave as they like; each one's own messages keep their order.
    typed = ["a0 from a2 0", "a0 cli 0", "a0 cli 1", "a0 from a2 1"]
    assert found(tmp_path, accepted, typed, DONE=1) == []


def test_lost_doubled_and_out_of_order_are_each_named(tmp_path: Path) -> None:
    accepted = ["a0 cli 0", "a0 cli 1", "a0 cli 2"]
    assert found(tmp_path, accepted, ["a0 cli 0", "a0 cli 1"]) == [
        "lost: 'a0 cli 2' was accepted but never typed"
    ]
    assert found(tmp_path, accepted, ["a0 cli 0", "a0 cli 1", "a0 cli 1", "a0 cli 2"]) == [
        "doubled: 'a0 cli 1' typed 2 times"
    ]
    assert found(tmp_path, accepted, ["a0 cli 0", "a0 cli 2", "a0 cli 1"]) == [
        "out of order: 'a0 cli 1' after a0 cli 2"
    ]


def test_an_approval_answered_twice_or_left_open_is_named(tmp_path: Path) -> None:
    assert found(tmp_path, [], [], TWICE=2, OPEN=1) == [
        "approval TWICE decided 2 times",
        "approval OPEN never closed",
    ]


def test_a_process_agents_prompts_are_read_from_its_log_and_counted_apart(tmp_path: Path) -> None:
    """The scripted ACP agent logs each prompt; one prompt may carry several messages, and a
    process started again after a kill appends to the same log."""
    log = [
        {"pid": 1, "started": True},
        {"pid": 1, "prompt": "[cli:local] p0 cli 0\n\n[from: a2] p0 from a2 0", "session": "s"},
        {"pid": 2, "load_session": "s"},
        {"pid": 2, "prompt": "[cli:local] p0 cli 1", "session": "s"},
        {"pid": 2, "prompt": "[cli:local] p0 cli 1", "session": "s"},
    ]
    (tmp_path / ".acp-agent.jsonl").write_text("".join(json.dumps(e) + "\n" for e in log))
    seen = prompted(tmp_path)
    assert seen == ["p0 cli 0", "p0 from a2 0", "p0 cli 1", "p0 cli 1"]
    ledger = Ledger()
    ledger.accepted["p0"] = ["p0 cli 0", "p0 from a2 0", "p0 cli 1", "p0 cli 2"]
    ledger.accepted["a0"] = ["a0 cli 0"]
    tallies = {"a0": Tally("pane"), "p0": Tally("process")}
    assert problems(ledger, {"a0": ["a0 cli 0"], "p0": seen}, [], tallies) == [
        "lost: 'p0 cli 2' was accepted but never prompted",
        "doubled: 'p0 cli 1' prompted 2 times",
    ]
    assert tallies["p0"] == Tally("process", accepted=4, seen=4, lost=1, doubled=1)
    assert tallies["a0"] == Tally("pane", accepted=1, seen=1)
