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
from bench.systems import SYSTEMS

RESULTS_DIR = Path(__file__).parent / "results"


BACKENDS = {cls.name: cls.backend for cls in SYSTEMS}


def backend_of(r: Result) -> str:
    """Where a result's system keeps its messages (sqlite, postgres, rabbitmq)."""
    return BACKENDS.get(r.system, "sqlite")


def best_peer(group: list[Result], backend: str = "sqlite") -> Result | None:
    """The peer on ``backend`` with the best median in one (workload, figure) group; raw
    SQLite is the machine's limit, not a peer."""
    peers = [r for r in group
             if r.kind == "peer" and r.median is not None and backend_of(r) == backend]
    if not peers:
        return None
    pick = max if group[0].higher_is_better else min
    return pick(peers, key=lambda r: r.median or 0.0)


def ratio(ours: Result, group: list[Result]) -> tuple[float, Result] | None:
    """``ours``' median divided by the best peer's on the same backend, with that peer."""
    best = best_peer(group, backend_of(ours))
    if ours.median is None or best is None or not best.median:
        return None
    return ours.median / best.median, best


def groups(results: Iterable[Result]) -> dict[tuple[str, str], list[Result]]:
    """Results keyed by (workload, figure), in the order they were made."""
    out: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        out.setdefault((r.workload, r.metric), []).append(r)
    return out


def table(results: list[Result], notes: dict[str, dict[str, str]], title: str) -> Table:
    """Workload, system, figure, min-max and sbroker / the best peer of its own backend."""
    t = Table(title=title, title_justify="left", pad_edge=False)
    for name, just in [("Workload", "left"), ("System", "left"), ("Median", "right"),
                       ("Min - max", "right"), ("sbroker / best peer, same backend", "right"),
                       ("Note", "left")]:
        t.add_column(name, justify=just, overflow="fold")  # type: ignore[arg-type]
    for (workload, metric), group in groups(results).items():
        bests = {id(best_peer(group, backend_of(r))) for r in group if r.kind == "subject"}
        for i, r in enumerate(group):
            label = f"{workload} {metric} ({r.unit})" if i == 0 else ""
            if r.median is None:
                t.add_row(label, r.system, "n/a", "", "", r.na or "not run", style="dim")
                continue
            span = f"{num(min(r.values), r.unit)} - {num(max(r.values), r.unit)}"
            rat = ratio(r, group) if r.kind == "subject" else None
            cell = f"{rat[0]:.2f}x vs {rat[1].system}" if rat else ""
            note = "best peer" if id(r) in bests else (
                "machine limit, not a peer" if r.kind == "limit" else "")
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
    console.print("  Ratio = sbroker's median / the best median of the peers on the same backend"
                  " (SQLite or PostgreSQL): for msgs/s above 1 and for ms below 1 means sbroker"
                  " is ahead.")
    console.print(f"  Durability '{meta['durability']}' per system:")
    for name, n in notes.items():
        if "durability" in n:
            console.print(f"    {name}: {n['durability']}")


def write_json(results: list[Result], meta: dict[str, Any]) -> Path:
    """Write latest.json and a timestamped copy; return the timestamped path."""
    stamp = datetime.fromisoformat(meta["started"]).strftime("%Y%m%dT%H%M%SZ")
    data = {"meta": meta, "results": [r.to_json() for r in results]}
    store("latest.json", data)
    return store(f"{stamp}{'-quick' if meta['quick'] else ''}.json", data)


def store(name: str, data: dict[str, Any]) -> Path:
    """Write bench/results/NAME; its path."""
    return write_whole(RESULTS_DIR / name, json.dumps(data, indent=2) + "\n")


def write_whole(path: Path, text: str) -> Path:
    """Write ``path`` in one step: a reader (``python -m bench --write-docs``, the docs test
    running beside it) never sees half a file."""
    path.parent.mkdir(exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    part.write_text(text)
    os.replace(part, path)
    return path
