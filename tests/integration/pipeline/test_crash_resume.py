"""A durable run killed with kill -9 at seeded random moments and resumed each time, until it
succeeds (docs/pipelines.md): every task ends with exactly one succeeded attempt, no task that
had succeeded before a resume runs again, and no task starts before the tasks it comes after
succeeded.  First the ``sbroker run`` process is killed (it runs the executor too), then the
executor's own process (``sbroker serve`` on the same database) while the run waits.

Real processes; the Python tasks never touch Spark, so no JVM starts."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(600)

TASKS = '''
import os
import time


def work(spark, log, name, seconds):
    """Say it started, work a little, say it ended (before its success is recorded)."""
    with open(log, "a") as out:
        out.write(f"start {name} {os.getpid()}\\n")
    time.sleep(seconds)
    with open(log, "a") as out:
        out.write(f"end {name} {os.getpid()}\\n")
    return name
'''
# a dozen tasks: two roots, fan-out, fan-in, a chain
AFTER = {
    "t01": [], "t02": [], "t03": ["t01"], "t04": ["t01"], "t05": ["t02"], "t06": ["t03", "t05"],
    "t07": ["t04"], "t08": ["t06", "t07"], "t09": ["t08"], "t10": ["t08"], "t11": ["t02"],
    "t12": ["t09", "t10", "t11"],
}
KILLS = 5
DEADLINE = 120.0


def _pipeline(folder: Path, log: Path) -> Path:
    (folder / "crash_tasks.py").write_text(TASKS)
    text = '[pipeline]\nname = "crashy"\n[options]\nconcurrency = 3\n'
    for i, (name, after) in enumerate(AFTER.items()):
        deps = ", ".join(f'"{a}"' for a in after)
        text += textwrap.dedent(f'''
            [[task]]
            name = "{name}"
            python = "crash_tasks:work"
            after = [{deps}]
            args = {{ log = "{log}", name = "{name}", seconds = {0.1 + 0.05 * (i % 4)} }}
        ''')
    path = folder / "crashy.toml"
    path.write_text(text)
    return path


def _sbroker(folder: Path, db: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "sbroker.cli", "--db", str(db), *args],
                            cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _starts(log: Path) -> int:
    return sum(1 for line in _lines(log) if line.startswith("start "))


def _wait_for_starts(log: Path, count: int, procs: list[subprocess.Popen[str]]) -> bool:
    """Poll the task log (bounded) until ``count`` starts; False if a process ended first."""
    end = time.monotonic() + DEADLINE
    tick = threading.Event()
    while _starts(log) < count:
        if any(p.poll() is not None for p in procs):
            return False
        assert time.monotonic() < end, "the run made no progress"
        tick.wait(0.01)
    return True


def _query(db: Path, sql: str) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn:
        return list(conn.execute(sql))


def _succeeded_attempts(db: Path) -> dict[str, int]:
    rows = _query(db, "SELECT a.Task, count(*) FROM PipelineAttempts a JOIN ExecutionLog e"
                      " ON e.LogID = a.LogID WHERE e.Status = 'succeeded' GROUP BY a.Task")
    return {str(task): int(n) for task, n in rows}


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()  # reaped: a zombie would still look alive to the broker's liveness test
    assert proc.stdout is not None
    proc.stdout.close()


def _check(db: Path, log: Path, succeeded_before: list[tuple[int, set[str]]]) -> None:
    assert _succeeded_attempts(db) == dict.fromkeys(AFTER, 1)
    [(status,)] = _query(db, "SELECT Status FROM PipelineRuns")
    assert status == "succeeded"
    lines = _lines(log)
    for at, done in succeeded_before:  # nothing that had succeeded ran after a resume
        again = {line.split()[1] for line in lines[at:] if line.startswith("start ")}
        assert not again & done, (again & done, at)
    ended: set[str] = set()
    for line in lines:  # a task started only after each task it comes after had ended
        word, name, _ = line.split()
        if word == "start":
            assert set(AFTER[name]) <= ended, (name, AFTER[name], ended)
        else:
            ended.add(name)
    times = {task: (start, end) for task, start, end in _query(
        db, "SELECT a.Task, e.StartTime, e.EndTime FROM PipelineAttempts a JOIN ExecutionLog e"
            " ON e.LogID = a.LogID WHERE e.Status = 'succeeded'")}
    for name, after in AFTER.items():
        for dep in after:
            assert str(times[name][0]) >= str(times[dep][1])


def test_the_run_process_killed_at_random_moments_and_resumed(tmp_path: Path) -> None:
    rng = random.Random(3801)
    log, db = tmp_path / "tasks.log", tmp_path / "run.db"
    path = _pipeline(tmp_path, log)
    succeeded_before: list[tuple[int, set[str]]] = []
    proc = _sbroker(tmp_path, db, "run", str(path))
    for _ in range(KILLS):
        reached = _wait_for_starts(log, _starts(log) + rng.randint(1, 2), [proc])
        assert reached, proc.communicate()[0]
        threading.Event().wait(rng.uniform(0.0, 0.25))  # a random moment, not an event
        _kill(proc)
        succeeded_before.append((len(_lines(log)), set(_succeeded_attempts(db))))
        proc = _sbroker(tmp_path, db, "run", str(path), "--resume")
    out, _ = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 0, out
    _check(db, log, succeeded_before)


def test_the_executor_process_killed_at_random_moments_while_the_run_waits(
        tmp_path: Path) -> None:
    rng = random.Random(3802)
    log, db = tmp_path / "tasks.log", tmp_path / "run.db"
    path = _pipeline(tmp_path, log)
    assert subprocess.run([sys.executable, "-m", "sbroker.cli", "--db", str(db), "init"],
                          capture_output=True, check=False).returncode == 0
    serve = _sbroker(tmp_path, db, "serve")
    run = _sbroker(tmp_path, db, "run", "--no-executor", str(path))
    try:
        for _ in range(KILLS):
            reached = _wait_for_starts(log, _starts(log) + rng.randint(1, 2), [run, serve])
            assert reached, (run.poll(), serve.poll())
            threading.Event().wait(rng.uniform(0.0, 0.25))
            _kill(serve)
            serve = _sbroker(tmp_path, db, "serve")
        out, _ = run.communicate(timeout=DEADLINE)
        assert run.returncode == 0, out
    finally:
        for proc in (run, serve):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
    _check(db, log, [])
