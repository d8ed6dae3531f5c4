"""The one table the suite prints, and the JSON file it writes under bench/results/."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.runner import Result, num

RESULTS_DIR = Path(__file__).parent / "results"


def best_peer(group: list[Result]) -> Result | None:
    """The peer with the best median in one (workload, figure) group; raw SQLite is no peer."""
    peers = [r for r in group if r.kind == "peer" and r.median is not None]
    if not peers:
        return None
    pick = max if group[0].higher_is_better else min
    return pick(peers, key=lambda r: r.median or 0.0)


def ratio(group: list[Result]) -> tuple[float, Result] | None:
    """sbroker's median divided by the best peer's, with that peer; None when either is n/a."""
    ours = next((r for r in group if r.kind == "subject" and r.median is not None), None)
    best = best_peer(group)
    if ours is None or best is None or not best.median:
        return None
    return (ours.median or 0.0) / best.median, best


def groups(results: Iterable[Result]) -> dict[tuple[str, str], list[Result]]:
    """Results keyed by (workload, figure), in the order they were made."""
    out: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        out.setdefault((r.workload, r.metric), []).append(r)
    return out


def table(results: list[Result], notes: dict[str, dict[str, str]], title: str) -> Table:
    """Workload, system, figure, min-max and the ratio sbroker / best peer, one row a figure."""
    t = Table(title=title, title_justify="left", pad_edge=False)
    for name, just in [("Workload", "left"), ("System", "left"), ("Median", "right"),
                       ("Min - max", "right"), ("sbroker / best peer", "right"),
                       ("Note", "left")]:
        t.add_column(name, justify=just, overflow="fold")  # type: ignore[arg-type]
    for (workload, metric), group in groups(results).items():
        rat = ratio(group)
        best = best_peer(group)
        for i, r in enumerate(group):
            label = f"{workload} {metric} ({r.unit})" if i == 0 else ""
            if r.median is None:
                t.add_row(label, r.system, "n/a", "", "", r.na or "not run", style="dim")
                continue
            span = f"{num(min(r.values), r.unit)} - {num(max(r.values), r.unit)}"
            cell = f"{rat[0]:.2f}x vs {rat[1].system}" if rat and r.kind == "subject" else ""
            note = {"limit": "machine limit, not a peer"}.get(r.kind, "")
            if r is best:
                note = "best peer"
            if workload == "W4":
                note = ", ".join(x for x in (note, notes.get(r.system, {}).get("waits_by")) if x)
            style = "bold" if r.kind == "subject" else None
            t.add_row(label, r.system, num(r.median, r.unit), span, cell, note, style=style)
        t.add_section()
    return t


def print_report(console: Console, results: list[Result], meta: dict[str, Any]) -> None:
    """Print the table and the lines that say what was measured."""
    notes: dict[str, dict[str, str]] = meta["systems"]
    title = (f"sbroker vs peers — durability {meta['durability']}, median of {meta['runs']} runs"
             f"{' (--quick)' if meta['quick'] else ''}")
    console.print(table(results, notes, title))
    for line in meta["workloads"]:
        console.print(f"  {line}")
    console.print("  Ratio = sbroker median / best peer median: for msgs/s above 1 and for ms"
                  " below 1 means sbroker is ahead.")
    console.print(f"  Durability '{meta['durability']}' per system:")
    for name, n in notes.items():
        if "durability" in n:
            console.print(f"    {name}: {n['durability']}")


def write_json(results: list[Result], meta: dict[str, Any]) -> Path:
    """Write latest.json and a timestamped copy; return the timestamped path."""
    RESULTS_DIR.mkdir(exist_ok=True)
    data = {"meta": meta, "results": [r.to_json() for r in results]}
    text = json.dumps(data, indent=2) + "\n"
    stamp = datetime.fromisoformat(meta["started"]).strftime("%Y%m%dT%H%M%SZ")
    kept = RESULTS_DIR / f"{stamp}{'-quick' if meta['quick'] else ''}.json"
    for path in (kept, RESULTS_DIR / "latest.json"):
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return kept
