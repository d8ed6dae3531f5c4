"""Runs that outlive their driver, timed with real processes (docs/pipelines.md, "Running in
production").

``python -m bench.takeover [--rounds 5] [--backends sqlite,postgresql] [--only resume,takeover]``

- resume: ``sbroker run`` of a chain of three tasks is killed with kill -9 while its first
  task runs, then ``sbroker run FILE --resume`` starts; the figure is the time from the
  resume's launch to its first task starting (and, apart, from its launch to the run taken
  up, which is Python's and sbroker's start-up).
- takeover: two ``sbroker serve`` processes; a submitted run of the chain; the server that
  drives it is killed with kill -9 while a task runs; the figure is the time from the kill to
  the first task started by the other server, with the default lease and with
  ``lease = "3s"``.  And the driving server paused (SIGSTOP) instead of killed, lease 3 s:
  the time until the other server drives the run (its lease must run out first; a task that
  the paused server's executor runs goes on only when it is resumed).

Each task appends ``start NAME PID TIME`` to a log; times are this machine's wall clock
(one host). Medians of ``--rounds``, with the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.servers import databases

TASKS = '''
import os
import time


def work(spark, log, name, seconds):
    with open(log, "a") as out:
        out.write(f"start {name} {os.getpid()} {time.time()}\\n")
    time.sleep(seconds)
    return name
'''
DEADLINE = 120.0


def chain(folder: Path, log: Path, seconds: float, lease: str | None) -> Path:
    """A pipeline of three tasks, one after the other."""
    (folder / "bench_chain_tasks.py").write_text(TASKS)
    text = '[pipeline]\nname = "chain"\n'
    if lease:
        text += f'[options]\nlease = "{lease}"\n'
    for i, name in enumerate("abc"):
        after = f'after = ["{"abc"[i - 1]}"]\n' if i else ""
        text += (f'[[task]]\nname = "{name}"\npython = "bench_chain_tasks:work"\n{after}'
                 f'args = {{ log = "{log}", name = "{name}", seconds = {seconds} }}\n')
    path = folder / "chain.toml"
    path.write_text(text)
    return path


def sbroker(db: str, folder: Path, *args: str, out: Any = subprocess.PIPE
            ) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "sbroker.cli", "--db", db, *args],
                            cwd=folder, stdout=out, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))


def server(db: str, folder: Path, n: int) -> subprocess.Popen[str]:
    """`sbroker serve`, its output in a file (a pipe nobody reads would block it), once it
    says it serves."""
    out = folder / f"serve{n}.log"
    with out.open("w") as sink:
        proc = sbroker(db, folder, "serve", out=sink)
    wait_for(lambda: "sbroker: serving" in out.read_text() or proc.poll() is not None,
             "a server did not start")
    if proc.poll() is not None:
        raise RuntimeError(f"a server did not start: {out.read_text()}")
    return proc


def starts(log: Path) -> list[tuple[str, int, float]]:
    if not log.exists():
        return []
    out = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "start":
            out.append((parts[1], int(parts[2]), float(parts[3])))
    return out


def wait_for(check: object, what: str) -> object:
    end = time.monotonic() + DEADLINE
    tick = threading.Event()
    while not (got := check()):  # type: ignore[operator]
        if time.monotonic() > end:
            raise TimeoutError(what)
        tick.wait(0.005)
    return got


def stop(proc: subprocess.Popen[str], kill: bool = False) -> None:
    """kill -9 (reaped at once, as a service manager does), or SIGTERM (SIGKILL after 30 s)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)  # a paused server must be able to stop
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def resume_round(db: str, folder: Path) -> tuple[float, float]:
    """Seconds from the resume's launch to (its first task started, the run taken up)."""
    log = folder / "tasks.log"
    path = chain(folder, log, 0.5, None)
    first = sbroker(db, folder, "run", str(path))
    wait_for(lambda: starts(log), "the first run never started a task")
    stop(first, kill=True)
    before = len(starts(log))
    launched = time.time()
    resume = sbroker(db, folder, "run", str(path), "--resume")
    assert resume.stdout is not None
    line = resume.stdout.readline()
    taken = time.time() - launched
    if "resuming" not in line:
        raise RuntimeError(f"the resume said {line!r}")
    got = wait_for(lambda: starts(log)[before:], "the resume never started a task")
    resume.communicate(timeout=DEADLINE)
    return got[0][2] - launched, taken  # type: ignore[index]


def takeover_round(db: str, folder: Path, lease: str | None, pause: bool) -> float:
    """Seconds from the driving server's kill (or pause) to the other's first task start."""
    log = folder / "tasks.log"
    path = chain(folder, log, 2.0 if not pause else 1.0 + _seconds(lease), lease)
    sbroker(db, folder, "init").communicate()
    servers = [server(db, folder, n) for n in range(2)]
    try:
        run_id = int(sbroker(db, folder, "run", str(path), "--submit").communicate()[0])
        [(_, pid, _)] = wait_for(lambda: starts(log), "no server started the run")  # type: ignore[misc]
        driver = _driver(db, folder, run_id)
        victim = next(s for s in servers if s.pid == driver)
        before = len(starts(log))
        at = time.time()
        if pause:  # the run is taken over once the lease ran out: its new driver
            victim.send_signal(signal.SIGSTOP)
            wait_for(lambda: _driver(db, folder, run_id) != victim.pid, "never taken over")
            return time.time() - at
        stop(victim, kill=True)
        try:
            got = wait_for(lambda: [s for s in starts(log)[before:] if s[1] != victim.pid],
                           "no other server took the run over")
        except TimeoutError:
            print(log.read_text(), *(p.read_text() for p in folder.glob("serve*.log")))
            raise
        return got[0][2] - at  # type: ignore[index, no-any-return]
    finally:
        for s in servers:
            stop(s)


def _seconds(lease: str | None) -> float:
    return 30.0 if lease is None else float(lease.rstrip("s"))


def _driver(db: str, folder: Path, run_id: int) -> int:
    """The pid of the run's driver now (waiting while it has none)."""
    import sbroker
    from sbroker.apps.pipeline import get_run

    with sbroker.Broker.open(db) as b:
        def ask() -> int | None:
            run = get_run(b, run_id)
            driver = None if run is None else run["driver"]
            return None if driver is None else int(driver["pid"])

        return int(wait_for(ask, "the run has no driver"))  # type: ignore[arg-type]


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split(" ")[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.takeover", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--only", default="resume,takeover")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    print(f"load average before: {loadavg()}")
    for backend in args.backends.split(","):
        with databases(backend) as new, tempfile.TemporaryDirectory() as tmp:
            def fresh() -> tuple[str, Path]:
                return new("takeover"), Path(tempfile.mkdtemp(dir=tmp))

            if "resume" in only:
                got = [resume_round(*fresh()) for _ in range(args.rounds)]
                print(f"{backend:10} resume after kill -9: first task "
                      f"{statistics.median(g[0] for g in got):.2f} s after the launch (run "
                      f"taken up {statistics.median(g[1] for g in got):.2f} s after it;"
                      f" {args.rounds} rounds)")
            if "takeover" in only:
                for lease, pause in ((None, False), ("3s", False), ("3s", True)):
                    got1 = [takeover_round(*fresh(), lease, pause)
                            for _ in range(args.rounds)]
                    how = "SIGSTOP" if pause else "kill -9"
                    what = "driven by the other" if pause else "first task started by the other"
                    print(f"{backend:10} takeover after {how} of the driving server, lease "
                          f"{lease or '30s (default)'}: {what} "
                          f"{statistics.median(got1):.2f} s after (max {max(got1):.2f} s;"
                          f" {args.rounds} rounds)")
    print(f"load average after: {loadavg()}")


if __name__ == "__main__":
    main()
