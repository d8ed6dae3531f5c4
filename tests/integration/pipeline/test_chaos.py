"""Three `sbroker serve` processes on one database drive ten submitted runs of a dozen-task
DAG while, every 0.5-2 s (seeded), one of them is killed with kill -9 or paused with SIGSTOP
past its lease (then resumed), and a new one is started (docs/pipelines.md, "Running in
production").  At the end, on SQLite and on PostgreSQL:

- every run succeeded, and every task has exactly one succeeded attempt (its run's record
  and its ExecutionLog row agree);
- a driver that lost its lease sent nothing more: a run's attempts, in the order they were
  sent, carry lease tokens that never go down;
- no succeeded task ran again: its last start is its succeeded attempt's;
- no task started before the tasks it comes after had succeeded;
- no task ran twice at once: the spans of its starts, each ended by its own end line or by
  the death of its process, never overlap (a paused server's task is paused with it: its
  span covers the pause, so a re-run elsewhere meanwhile would overlap it).

Real processes; the tasks are tiny Python functions (no JVM), three of them fail once and
are retried (a driver paused while a retry waits has something to send when it resumes:
fencing must stop it), the lease 2 s."""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

import sbroker
from sbroker.apps.pipeline import get_run, list_runs, load_pipeline, run_attempts, submit_run

pytestmark = pytest.mark.timeout(600)
TASKS = '''
import os
import time


def work(spark, log, run, name, seconds, flaky=False):
    """Say it started (with its process and parent), work a little, say it ended; a flaky
    task fails its first call (of its run) after working."""
    with open(log, "a") as out:
        out.write(f"start {run} {name} {os.getpid()} {os.getppid()} {time.time()!r}\\n")
    marker = f"{log}.failed-{run}-{name}"
    first = flaky and not os.path.exists(marker)
    if first:
        open(marker, "w").close()
    time.sleep(seconds)
    with open(log, "a") as out:
        out.write(f"end {run} {name} {os.getpid()} {os.getppid()} {time.time()!r}\\n")
    if first:
        raise RuntimeError("a transient failure")
    return name
'''
AFTER = {  # a dozen tasks: two roots, fan-out, fan-in, a chain
    "t01": [], "t02": [], "t03": ["t01"], "t04": ["t01"], "t05": ["t02"], "t06": ["t03", "t05"],
    "t07": ["t04"], "t08": ["t06", "t07"], "t09": ["t08"], "t10": ["t08"], "t11": ["t02"],
    "t12": ["t09", "t10", "t11"],
}
FLAKY = {"t03", "t08", "t10"}  # their first call fails: retried after retry_delay
RUNS = 10
SERVERS = 3
LEASE = 2.0
EVENTS = 12  # chaos events at most, then the servers are left to finish
DEADLINE = 120.0


def _pipeline(folder: Path, log: Path) -> Path:
    (folder / "chaos_tasks.py").write_text(TASKS)
    text = (f'[pipeline]\nname = "chaos"\n[params]\nrun = 0\n[options]\nconcurrency = 2\n'
            f'lease = "{LEASE:g}s"\nretries = 1\nretry_delay = "300ms"\n')
    for i, (name, after) in enumerate(AFTER.items()):
        deps = ", ".join(f'"{a}"' for a in after)
        secs, flaky = 0.3 + 0.1 * (i % 3), "true" if name in FLAKY else "false"
        args = (f'log = "{log}", run = "${{run}}", name = "{name}", seconds = {secs},'
                f" flaky = {flaky}")
        text += textwrap.dedent(f'''
            [[task]]
            name = "{name}"
            python = "chaos_tasks:work"
            after = [{deps}]
            args = {{ {args} }}
        ''')
    path = folder / "chaos.toml"
    path.write_text(text)
    return path


class Servers:
    """The `sbroker serve` processes, each with its output in a file, and when each died."""

    def __init__(self, database: str, folder: Path) -> None:
        self.database, self.folder = database, folder
        self.live: list[subprocess.Popen[str]] = []
        self.died: dict[int, float] = {}  # pid -> when it was killed
        self.paused: set[int] = set()
        self.pauses = 0
        self._timers: list[threading.Timer] = []
        self._n = 0

    def start(self) -> None:
        self._n += 1
        with (self.folder / f"serve{self._n}.log").open("w") as out:
            self.live.append(subprocess.Popen(
                [sys.executable, "-m", "sbroker.cli", "--db", self.database, "serve"],
                cwd=self.folder, stdout=out, stderr=subprocess.STDOUT, text=True,
                env=dict(os.environ, PYTHONUNBUFFERED="1")))

    def kill(self, proc: subprocess.Popen[str]) -> None:
        self.died[proc.pid] = time.time()
        proc.send_signal(signal.SIGKILL)
        proc.wait()  # reaped at once, as a service manager does
        self.live.remove(proc)

    def pause(self, proc: subprocess.Popen[str], seconds: float) -> None:
        """SIGSTOP now, SIGCONT after ``seconds`` (past its lease): it serves again then."""
        proc.send_signal(signal.SIGSTOP)
        self.paused.add(proc.pid)
        self.pauses += 1

        def resume() -> None:
            self.paused.discard(proc.pid)
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)

        timer = threading.Timer(seconds, resume)
        self._timers.append(timer)
        timer.start()

    def stop_all(self) -> None:
        for timer in self._timers:
            timer.cancel()
        for proc in self.live:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for proc in self.live:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _chaos(servers: Servers, rng: random.Random, done: threading.Event,
           database: str) -> None:
    """Every 0.5-2 s: kill -9 one server (or pause it past its lease) and start a new one.
    The victim is a server that drives runs, when one does (else any)."""
    with sbroker.Broker.open(database) as b:
        for event in range(EVENTS):
            if done.wait(rng.uniform(0.5, 2.0)):
                return
            drivers = {r["driver"]["pid"] for r in map(lambda run: get_run(b, run["run_id"]),
                                                       list_runs(b, "chaos"))
                       if r is not None and r["driver"] is not None}
            running = [p for p in servers.live if p.pid not in servers.paused]
            victim = rng.choice([p for p in running if p.pid in drivers] or running)
            pause = event % 2 == 1 or rng.random() < 0.3  # some pauses, whatever the seed
            if pause and len(servers.live) <= SERVERS:
                servers.pause(victim, LEASE + rng.uniform(0.5, 1.5))
            else:
                servers.kill(victim)
            servers.start()


def _iso(text: str) -> float:
    return dt.datetime.fromisoformat(text).timestamp()


def _spans(log: Path, died: dict[int, float]) -> dict[tuple[str, str], list[list[float]]]:
    """Each (run, task)'s starts as [start, end] spans: ended by its end line, or by the
    death of its process (a task run in a child process dies with its server)."""
    spans: dict[tuple[str, str], list[list[float]]] = defaultdict(list)
    open_: dict[tuple[str, str, str], list[float]] = {}
    for line in log.read_text().splitlines():
        word, run, name, pid, ppid, at = line.split()
        if word == "start":
            span = [float(at), died.get(int(pid), died.get(int(ppid), float("inf")))]
            spans[(run, name)].append(span)
            open_[(run, name, pid)] = span
        else:
            open_.pop((run, name, pid))[1] = float(at)
    return spans


def _check(database: str, log: Path, died: dict[int, float], labels: dict[int, str]) -> None:
    """The checks of the module's docstring (``labels``: each run's ``run`` parameter, which
    its tasks log)."""
    with sbroker.Broker.open(database) as b:
        runs = list_runs(b, "chaos")
        assert sorted(r["status"] for r in runs) == ["succeeded"] * RUNS, runs
        takeovers = sum(get_run(b, r["run_id"])["takeovers"] for r in runs)  # type: ignore[index]
        assert takeovers > 0  # the chaos did hit drivers
        attempts = {r["run_id"]: run_attempts(b, r["run_id"]) for r in runs}
        with b.transaction() as tx:
            tokens = tx.execute("SELECT RunID, LogID, LeaseToken FROM PipelineAttempts"
                                " ORDER BY LogID").fetchall()
        logged = {int(r["LogID"]): r["Status"] for r in b.view("ExecutionLog")}
    sent: dict[int, list[int]] = defaultdict(list)
    for run_id, _, token in tokens:
        sent[int(run_id)].append(int(token))
    for run_id, in_order in sent.items():
        assert in_order == sorted(in_order), (run_id, in_order)
    spans = _spans(log, died)
    for run_id, rows in attempts.items():
        by_task: dict[str, list[dict[str, object]]] = defaultdict(list)
        for a in rows:
            by_task[str(a["task"])].append(a)
        label = labels[run_id]
        succeeded = {}
        for name in AFTER:
            ok = [a for a in by_task[name] if a["status"] == "succeeded"]
            assert len(ok) == 1, (run_id, name, by_task[name])
            assert [a for a in by_task[name] if logged[int(a["log_id"])] == "succeeded"] == ok
            succeeded[name] = ok[0]
        for name, after in AFTER.items():
            starts = sorted(s[0] for s in spans[(label, name)])
            start, end = _iso(str(succeeded[name]["start_time"])), _iso(
                str(succeeded[name]["end_time"]))
            assert start - 0.01 <= starts[-1] <= end, (run_id, name, starts, start, end)
            for dep in after:  # every start of the task came after its deps succeeded
                assert starts[0] >= _iso(str(succeeded[dep]["end_time"])) - 0.01, (
                    run_id, name, dep)
    for key, task_spans in spans.items():  # no task ran twice at once
        task_spans.sort()
        for (_, end), (start, _) in itertools.pairwise(task_spans):
            assert start >= end, (key, task_spans)


def test_servers_killed_and_paused_at_random_still_drive_every_run_exactly(
        database: str, tmp_path: Path) -> None:
    rng = random.Random(5003)
    log = tmp_path / "tasks.log"
    path = _pipeline(tmp_path, log)
    with sbroker.Broker.open(database) as b:
        b.install_executor(max_queue_readers=4)  # the servers' executors (Python tasks only)
        ids = [submit_run(b, load_pipeline(path, {"run": str(k)})) for k in range(RUNS)]
    servers = Servers(database, tmp_path)
    done = threading.Event()
    for _ in range(SERVERS):
        servers.start()
    chaos = threading.Thread(target=_chaos, args=(servers, rng, done, database), daemon=True)
    chaos.start()
    try:
        with sbroker.Broker.open(database) as b:
            end = time.monotonic() + DEADLINE
            tick = threading.Event()
            while any(r["status"] == "running" for r in list_runs(b, "chaos")):
                assert time.monotonic() < end, [r["status"] for r in list_runs(b, "chaos")]
                tick.wait(0.2)
        done.set()
        chaos.join(60)
    finally:
        done.set()
        with contextlib.suppress(Exception):
            chaos.join(60)
        servers.stop_all()
    assert servers.died and servers.pauses  # both kinds of chaos happened
    _check(database, log, servers.died, {run_id: str(k) for k, run_id in enumerate(ids)})
