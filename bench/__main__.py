"""`python -m bench`: every workload against sbroker and its peers, one table, one JSON file."""

from __future__ import annotations

import argparse
import fnmatch
import os
import platform
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console

from bench.report import RESULTS_DIR, print_report, write_json
from bench.runner import Suite
from bench.servers import ServerPool
from bench.systems import SYSTEMS, System
from bench.targets import verdicts
from bench.workloads import FULL, QUICK, WORKLOADS, Sizes, Workload

PACKAGES = ["sbroker", "persist-queue", "huey", "litequeue", "pika", "psycopg"]


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true",
                   help="smaller message counts (under 2 minutes)")
    p.add_argument("--only", action="append", default=[], metavar="WORKLOAD/SYSTEM",
                   help="run only matching pairs; globs, either side may be left out: "
                        "W1/sbroker, W3, postgres, 'W[12]/*sqlite*' (repeatable)")
    p.add_argument("--runs", type=int, default=3, help="runs per figure (default 3)")
    p.add_argument("--durability", choices=["normal", "full"], default="normal")
    p.add_argument("--no-json", action="store_true", help="do not write bench/results/")
    p.add_argument("--write-docs", action="store_true",
                   help="only write docs/performance.md from the stored results (no run)")
    return p.parse_args(argv)


def selected(w: Workload, cls: type[System], patterns: list[str]) -> bool:
    """Whether any --only pattern picks this (workload, system) pair."""
    if not patterns:
        return True
    names = {s.name.lower() for s in SYSTEMS}
    for pat in (p.lower() for p in patterns):
        wp, sp = pat.split("/", 1) if "/" in pat else (
            ("*", pat) if fnmatch.filter(names, pat) else (pat, "*"))
        if fnmatch.fnmatch(w.name.lower(), wp or "*") and fnmatch.fnmatch(
                cls.name.lower(), sp or "*"):
            return True
    return False


def plan_for(patterns: list[str]) -> list[tuple[Workload, list[type[System]]]]:
    """The workloads to run, each with its systems, in table order."""
    plan = [(w, [s for s in SYSTEMS if selected(w, s, patterns)]) for w in WORKLOADS]
    return [(w, systems) for w, systems in plan if systems]


def versions() -> dict[str, str]:
    """Installed versions of the measured packages."""
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def git_commit() -> str:
    """The commit the suite ran at (with -dirty when the tree has changes)."""
    root = Path(__file__).parent.parent
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], cwd=root,
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def meta_for(args: argparse.Namespace, sizes: Sizes, suite: Suite, started: datetime,
             plan: list[tuple[Workload, list[type[System]]]]) -> dict[str, Any]:
    """Everything needed to read the figures later: sizes, durability, machine, versions."""
    return {
        "started": started.isoformat(), "seconds": round(time.time() - started.timestamp(), 1),
        "command": "python -m bench " + " ".join(sys.argv[1:]), "quick": args.quick,
        "runs": args.runs, "durability": args.durability, "sizes": sizes.__dict__,
        "workloads": [w.describe(sizes) for w, _ in plan], "systems": suite.notes,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "sqlite": sqlite3.sqlite_version},
        "versions": versions(), "commit": git_commit(),
        "targets": [v.to_json() for v in verdicts(suite.results)],
    }


def interrupt(signum: int, _frame: object) -> NoReturn:
    """Turn SIGTERM/SIGHUP into KeyboardInterrupt so that servers are stopped on the way out."""
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    """Run the suite, print the table, write the JSON; 130 when interrupted."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.write_docs:
        from bench.docs import write_docs

        print(f"wrote {write_docs()} from {RESULTS_DIR}")
        return 0
    console = Console(width=None if sys.stdout.isatty() else 160)
    progress = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 120)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)
    sizes = QUICK if args.quick else FULL
    plan = plan_for(args.only)
    if not plan:
        progress.print(f"--only {args.only} matches no workload/system pair")
        return 2
    if args.runs < 3:
        progress.print("[yellow]fewer than 3 runs: medians are not robust[/]")
    started = datetime.now(UTC)
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        progress.print(f"[dim]{time.perf_counter() - t0:6.1f}s[/] {msg}")

    suite = Suite(plan, sizes, args.runs, args.durability, log)
    pool = ServerPool(log)
    code = 0
    try:
        suite.run(pool)
    except KeyboardInterrupt:
        log("[red]interrupted[/]: stopping servers, printing what was measured")
        code = 130
    finally:
        pool.close()
    meta = meta_for(args, sizes, suite, started, plan)
    print_report(console, suite.results, meta)
    console.print("  The targets, on these medians:")
    for verdict in verdicts(suite.results):
        console.print(f"    {verdict.line()}", highlight=False)
    if not args.no_json and code == 0:
        path = write_json(suite.results, meta)
        console.print(f"  Results: {path} and {path.parent / 'latest.json'}"
                      f" ({meta['seconds']:.0f} s, commit {meta['commit']})")
    return code


if __name__ == "__main__":
    sys.exit(main())
