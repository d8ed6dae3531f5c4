"""What several benchmarks measure alike: CPU seconds of this process or of another (Linux's
/proc), ways taking turns, figures printed as JSON by a child process (possibly another
version's code), and a progress log."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")
T = TypeVar("T")


def cpu() -> float:
    """CPU seconds (user + system) of this process so far, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (ppid first, utime at 11)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_of(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far."""
    fields = stat(pid)
    return (int(fields[11]) + int(fields[12])) / TICK


def child_json(args: list[str], root: Path = ROOT, src: str | None = None) -> Any:
    """Run ``python ARGS`` in ``root`` with ``src`` (default ROOT/src) and ``root`` on the
    path; the JSON of the last line it printed.  Raises CalledProcessError if it failed."""
    path = os.pathsep.join([src or str(root / "src"), str(root)])
    done = subprocess.run([sys.executable, *args], cwd=root, capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": path})
    return json.loads(done.stdout.strip().splitlines()[-1])


def turns(ways: dict[str, Callable[[], T]], rounds: int) -> dict[str, list[T]]:
    """Every way once per round, in turn, so that a change of the machine's load falls on
    all of them alike; what each returned, by way."""
    got: dict[str, list[T]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, way in ways.items():
            got[name].append(way())
    return got


def progress() -> Callable[[str], None]:
    """A log to stderr, each line after the seconds since this call."""
    t0 = time.perf_counter()

    def log(line: str) -> None:
        print(f"{time.perf_counter() - t0:7.1f}s {line}", file=sys.stderr, flush=True)

    return log
