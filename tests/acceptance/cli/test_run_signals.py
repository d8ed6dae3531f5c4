"""``sbroker run`` stopped by SIGTERM behaves as Ctrl-C: the running tasks are cancelled, the
summary is printed, every unfinished ExecutionLog row says cancelled, the tasks not started
stay pending, the run is left ``cancelled`` (resumable), and the exit code is 143 (128 +
SIGTERM). A real process, as a user or a service manager stops it."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import sbroker
from sbroker.apps.pipeline.runs import get_run

TASKS = '''
import pathlib
import threading


def hold(spark, folder):
    """Say it started, then run until the test releases it (bounded)."""
    folder = pathlib.Path(folder)
    (folder / "started").touch()
    tick = threading.Event()
    for _ in range(1200):
        if (folder / "release").exists():
            return "released"
        tick.wait(0.05)
    return "never released"
'''


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
    """Poll for a file the child writes (bounded; the child is a separate process)."""
    end = time.monotonic() + timeout
    tick = threading.Event()
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, f"{path.name} never appeared"
        tick.wait(0.05)


def _wait_until_cancel_requested(db: Path, proc: subprocess.Popen[str],
                                 timeout: float = 60.0) -> None:
    """Poll the run's database (read-only) until a running task's cancel was requested."""
    end = time.monotonic() + timeout
    tick = threading.Event()
    while True:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn, \
                contextlib.suppress(sqlite3.OperationalError):  # busy or not there yet
            if conn.execute("SELECT 1 FROM ExecutionLog WHERE CancelRequested = 1").fetchone():
                return
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "the run never asked to cancel the running task"
        tick.wait(0.05)


def test_sigterm_cancels_the_stage_prints_the_summary_and_exits_143(tmp_path: Path) -> None:
    (tmp_path / "held_tasks.py").write_text(TASKS)
    (tmp_path / "held.toml").write_text(textwrap.dedent(f'''
        [pipeline]
        name = "held"
        [[stage]]
        name = "first"
        [[stage.task]]
        name = "running"
        python = "held_tasks:hold"
        args = {{ folder = "{tmp_path}" }}
        [[stage.task]]
        name = "queued"
        python = "held_tasks:hold"
        args = {{ folder = "{tmp_path}" }}
        [[stage]]
        name = "second"
        [[stage.task]]
        sql = "SELECT 1"
    '''))
    db = tmp_path / "run.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sbroker.cli", "--db", str(db), "run", "--readers", "1",
         "held.toml"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        _wait_for(tmp_path / "started", proc)
        proc.send_signal(signal.SIGTERM)
        # The running task ends by itself once released; released before the run asked to
        # cancel it, it would rightly end as succeeded: release it after the request.
        _wait_until_cancel_requested(db, proc)
        (tmp_path / "release").touch()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, (out, err)
    assert "pipeline held was interrupted" in out
    assert "--resume 1" in out  # the run is left resumable, and says how
    assert "Traceback" not in err
    with sbroker.Broker.open(db, create=False) as b:
        statuses = sorted(r["Status"] for r in b.view("ExecutionLog"))
        run = get_run(b, 1)
    assert statuses == ["cancelled", "cancelled"]
    assert run is not None and run["status"] == "cancelled"
    assert [t["status"] for t in run["tasks"]] == ["cancelled", "cancelled", "pending"]
