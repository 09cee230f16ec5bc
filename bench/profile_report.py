"""The profile's findings as Markdown."""

from __future__ import annotations

from typing import Any


def _stage_rows(runs: list[dict[str, Any]], section: str) -> list[str]:
    labels: list[str] = []
    for run in runs:
        for label in run["stages"].get(section, {}):
            if label not in labels:
                labels.append(label)
    rows = []
    for label in labels:
        cells = []
        for run in runs:
            v = run["stages"].get(section, {}).get(label)
            cells += [str(v["median_ms"]), str(v["p95_ms"])] if v else ["-", "-"]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return rows


def _ops_rows(runs: list[dict[str, Any]]) -> list[str]:
    names = sorted({name for run in runs for name in run["ops_per_message"]})
    rows = []
    for name in names:
        cells = []
        for run in runs:
            v = run["ops_per_message"].get(name)
            cells += [str(v["per_message"]), str(v["mean_ms"])] if v else ["-", "-"]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


def profile_markdown(profile: dict[str, Any]) -> list[str]:
    b2b, iso, tp = profile["back_to_back"], profile["isolated"], profile["throughput"]
    lines = [
        "## Profile (an instrumented mailbox run, its own dev server)",
        "",
        f"Latency stages, median / p95 ms. Back to back: {b2b['messages']} messages, each sent "
        f"when the previous one is visible (send -> visible p50 "
        f"{b2b['stages']['send -> visible'].get('p50')} ms). Isolated: {iso['messages']} "
        f"messages, {iso['pause_after_each_s'] * 1000:.0f} ms apart (p50 "
        f"{iso['stages']['send -> visible'].get('p50')} ms).",
        "",
        "| stage | back to back p50 | p95 | isolated p50 | p95 |",
        "|---|---:|---:|---:|---:|",
        *_stage_rows([b2b, iso], "path"),
        *_stage_rows([b2b, iso], "path_extra"),
        "| *after the text is visible:* | | | | |",
        *_stage_rows([b2b, iso], "after_visible"),
        "",
        f"Operations per message (count, mean ms): back to back, and the throughput run "
        f"({tp['messages']} messages at {tp['per_s']} msg/s, all agents at once):",
        "",
        "| operation | back to back n | mean ms | throughput n | mean ms |",
        "|---|---:|---:|---:|---:|",
        *_ops_rows([b2b, tp]),
        "",
        "Temporal SDK metrics (count in the window, mean ms):",
        "",
        "| metric | back to back n | mean ms | throughput n | mean ms |",
        "|---|---:|---:|---:|---:|",
    ]
    names = sorted(set(b2b["sdk_metrics"]) | set(tp["sdk_metrics"]))
    for name in names:
        cells = []
        for run in (b2b, tp):
            v = run["sdk_metrics"].get(name)
            cells += [str(int(v["count"])), str(v["mean_ms"])] if v else ["-", "-"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    hist = profile["history"]
    pools = [run.get("sqlite_pool", {}) for run in (b2b, tp)]
    lines += [
        "",
        "SQLite connections opened per message (pool overflow churn): back to back "
        f"{pools[0].get('connections_opened_per_message')}, throughput "
        f"{pools[1].get('connections_opened_per_message')} (pool checkouts per message "
        f"{pools[0].get('checkouts_per_message')} / {pools[1].get('checkouts_per_message')}).",
        "",
        f"History of the throughput agents: {hist['events_per_message']} events and "
        f"{hist['workflow_tasks_per_message']} workflow tasks per message, "
        f"{hist['history_json_bytes_per_message']} bytes of history (JSON) per message.",
    ]
    intr = profile.get("interrupt_under_backlog", {})
    if "error" in intr:
        lines += ["", f"Interrupt behind a queue: {intr['error']}."]
    elif intr:
        lines += [
            "",
            f"Interrupt behind a queue: {intr['queued_messages']} messages waited for an agent "
            f"that then registered (submit_delay_ms={intr['submit_delay_ms']}, the default); "
            f"interrupted once {intr['typed_before_the_interrupt_was_sent']} was typed, C-c "
            f"reached the pane after {intr['interrupt_visible_ms']} ms, behind "
            f"{intr['typed_after_it_was_sent_but_before_it']} more messages "
            f"({intr['typed_after_it']} came after it).",
        ]
    lock = profile.get("projection_lock_stall")
    if lock:
        replies = "; ".join(f"{k}: {v}" for k, v in lock["send_replies"].items())
        typed = ", ".join(f"{k} after {v} s" for k, v in lock["typed_after_s"].items())
        lines += [
            "",
            f"Projection write lock held by another process for {lock['lock_held_s']} s, then two "
            f"sends: replies {replies}; typed: {typed}.",
        ]
    warnings = profile.get("warnings", {})
    if warnings:
        lines += ["", "Logged during the profile:", ""]
        lines += [f"- {n} x {text}" for text, n in warnings.items()]
    rpc = profile["signal_rpc"]
    lines += [
        "",
        f"Signal RPC alone (no worker on the queue), p50 / p99 ms: signal-with-start "
        f"{rpc['signal_with_start_ms']['p50']} / {rpc['signal_with_start_ms']['p99']}, plain "
        f"signal {rpc['signal_ms']['p50']} / {rpc['signal_ms']['p99']}.",
        "",
        "SQLite projection writes (`Store.record_event`, fresh file, 400 writes):",
        "",
        "| writers | writes/s | p50 ms | p95 ms | max ms | CPU ms/write |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, v in profile["sqlite_write_contention"].items():
        lat = v["latency_ms"]
        lines.append(
            f"| {label} | {v['writes_per_s']} | {lat['p50']} | {lat['p95']} | {lat['max']} "
            f"| {v['cpu_ms_per_write']} |"
        )
    return lines
