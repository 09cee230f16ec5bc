"""The results as Markdown (printed, and written to ``mailbox-latest.md``) and the issue's aims."""

from __future__ import annotations

from typing import Any

P50_AIM_MS = 50
P99_AIM_MS = 200
THROUGHPUT_AIM = 0.8  # of the bare Temporal pipeline's


def aims(results: dict[str, Any]) -> dict[str, Any]:
    """Whether the mailbox meets issue 3's aims; throughput against both bare pipelines."""
    runs = results["pipelines"]
    mailbox = runs.get("mailbox")
    if mailbox is None:
        return {}
    out: dict[str, Any] = {
        "p50_ms": {"aim": f"< {P50_AIM_MS}", "value": mailbox["visible_ms"]["p50"]},
        "p99_ms": {"aim": f"< {P99_AIM_MS}", "value": mailbox["visible_ms"]["p99"]},
    }
    out["p50_ms"]["met"] = out["p50_ms"]["value"] < P50_AIM_MS
    out["p99_ms"]["met"] = out["p99_ms"]["value"] < P99_AIM_MS
    rate = mailbox["throughput"]["per_s"] or 0.0
    for slug in ("bare-local", "bare-activity"):
        if slug in runs and runs[slug]["throughput"]["per_s"]:
            ratio = rate / runs[slug]["throughput"]["per_s"]
            out[f"throughput_vs_{slug}"] = {
                "aim": f">= {THROUGHPUT_AIM}",
                "value": round(ratio, 2),
                "met": ratio >= THROUGHPUT_AIM,
            }
    return out


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def markdown(results: dict[str, Any]) -> str:
    m, p, w = results["machine"], results["parameters"], results.get("watcher", {})
    runs = results["pipelines"]
    lines = [
        f"# Mailbox benchmark, {m['date']}",
        "",
        f"{m['nproc']} CPUs ({m['cpu']}), {m['tmux']}, {m['temporal_cli']}, Python {m['python']}, "
        f"temporalio {m['temporalio']}. Load average {m['load_average_at_start']} at start, "
        f"{m.get('load_average_at_end')} at end (other processes share this machine: see the CPU "
        "table).",
        "",
        f"Latency: {p['latency_messages']} messages one at a time (after {p['warmup']} warm-up), "
        f"from submit to the text in the pane. Throughput: {p['agents']} agents x "
        f"{p['messages_per_agent']} messages, all agents at once. {p['message_chars']} characters "
        f"per message, submit_delay_ms={p['submit_delay_ms']}. {p['process_layout']}.",
        "",
    ]
    if w:
        d = w["detection_delay_ms"]
        lines += [
            f"Arrival watcher (poll every {p['poll_ms']} ms, measured {w['poll_interval_ms']} ms): "
            f"detection delay p50 {d['p50']} ms, p99 {d['p99']} ms, max {d['max']} ms; it uses "
            f"{w['cpu_percent_of_one_core']}% of one core. Every latency below includes it.",
            "",
        ]
    base = runs.get("bare-local", {}).get("throughput", {}).get("per_s")
    lines += [
        "| pipeline | p50 ms | p95 ms | p99 ms | max ms | accepted p50 ms | msg/s | "
        "x bare local | lost / dup / disordered | CPU ms/msg* |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in runs.values():
        v, a, t = r["visible_ms"], r["accepted_ms"], r["throughput"]
        ratio = round(t["per_s"] / base, 2) if base and t["per_s"] else None
        cpu = t["cpu_ms_per_message"]
        ours = sum(v for name, v in cpu.items() if name not in ("other processes", "watcher"))
        check = f"{t['lost']} / {t['duplicated']} / {t['out_of_order_agents']}"
        if t.get("send_errors"):
            check += f", {t['send_errors']} send errors"
        check += " ✓" if t["verified"] else " ✗"
        lines.append(
            f"| {r['name']} | {v['p50']} | {v['p95']} | {v['p99']} | {v['max']} | {a['p50']} | "
            f"{_cell(t['per_s'])} | {_cell(ratio)} | {check} | {ours:.2f} |"
        )
    lines += [
        "",
        "\\* CPU per message in the throughput run: the pipeline's processes (bench process, tmux "
        "clients and server, Temporal server), not the watcher or other processes.",
        "",
        "CPU per message in the throughput run (ms), by process:",
        "",
    ]
    names = list(next(iter(runs.values()))["throughput"]["cpu_ms_per_message"]) if runs else []
    lines += [
        "| pipeline | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for r in runs.values():
        cpu = r["throughput"]["cpu_ms_per_message"]
        lines.append(f"| {r['name']} | " + " | ".join(_cell(cpu.get(n)) for n in names) + " |")
    kinds: list[str] = []
    for r in runs.values():
        for name in r["throughput"].get("bench_process_threads_cpu_ms_per_message", {}):
            if name not in kinds:
                kinds.append(name)
    if kinds:
        lines += ["", "The bench process's CPU per message (ms), by thread:", ""]
        lines += ["| thread | " + " | ".join(r["name"] for r in runs.values()) + " |"]
        lines += ["|---|" + "---:|" * len(runs)]
        for kind in kinds:
            cells = [
                _cell(r["throughput"].get("bench_process_threads_cpu_ms_per_message", {}).get(kind))
                for r in runs.values()
            ]
            lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    goals = results.get("aims") or {}
    if goals:
        lines += ["", "## Aims (issue 3)", ""]
        for name, goal in goals.items():
            verdict = "met" if goal["met"] else "NOT met"
            lines.append(f"- {name}: {goal['value']} (aim {goal['aim']}): **{verdict}**")
    warnings = {
        slug: r["warnings"] for slug, r in runs.items() if r.get("warnings")
    }  # fmt: skip
    if warnings:
        lines += ["", "Warnings logged during the runs:", ""]
        for slug, counts in warnings.items():
            for text, n in counts.items():
                lines.append(f"- {slug}: {n} x {text}")
    if "profile" in results:
        from bench.profile_report import profile_markdown

        lines += ["", *profile_markdown(results["profile"])]
    return "\n".join(lines) + "\n"
