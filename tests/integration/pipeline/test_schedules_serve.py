"""Two `sbroker serve` processes on one database (two hosts, on PostgreSQL) and a schedule
whose runs fell due while no server was up: when they start, each missed run (catch-up)
starts once, and runs to its end (docs/pipelines.md).  Real processes; no JVM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import sbroker
from sbroker.apps.pipeline import list_runs, load_pipeline
from sbroker.apps.pipeline.schedules import add_schedule

pytestmark = pytest.mark.timeout(300)
TASKS = "def hello(spark, n):\n    return n * 2\n"
HOUR = 3600.0


def _serve(db: str, folder: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "sbroker.cli", "--db", db, "serve"],
                            cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))


def _serving(server: subprocess.Popen[str]) -> None:
    """Wait for a server's line saying it serves: from then on SIGTERM stops it cleanly (a
    SIGTERM while Python still imports ends the process by the signal, code -15)."""
    assert server.stdout is not None
    line = server.stdout.readline()
    assert line.startswith("sbroker: serving"), (line, server.poll())


def test_two_servers_start_each_missed_run_once(database: str, tmp_path: Path) -> None:
    (tmp_path / "hello_tasks.py").write_text(TASKS)
    path = tmp_path / "hourly.toml"
    path.write_text('[pipeline]\nname = "hourly"\n[schedule]\nevery = "1h"\ncatchup = true\n'
                    'overlap = "queue"\n[[task]]\nname = "a"\npython = "hello_tasks:hello"\n'
                    'args = { n = 21 }\n')
    with sbroker.Broker.open(database) as b:
        add_schedule(b, load_pipeline(path), overrides={})
        due = b.clock.now() - 4.5 * HOUR  # due 4.5 h ... 0.5 h ago, no server up: five runs
        update = "UPDATE PipelineSchedules SET NextDue = ?"
        with b.transaction() as tx:
            tx.execute(update.replace("?", "%s") if b.dialect == "postgresql" else update,
                       (due,))
            [(handle,)] = tx.execute("SELECT Handle FROM PipelineSchedules").fetchall()
            tx.begin_conversation_timer(handle, 0.001)  # fires while nothing serves
    servers = [_serve(database, tmp_path) for _ in range(2)]
    try:
        for s in servers:  # both start at once; the runs may begin before the second serves
            _serving(s)
        end = time.monotonic() + 120
        tick = threading.Event()
        with sbroker.Broker.open(database) as b:
            while True:
                runs = list_runs(b, "hourly")
                if len(runs) >= 5 and all(r["status"] == "succeeded" for r in runs):
                    break
                assert all(s.poll() is None for s in servers), [s.stderr for s in servers]
                assert time.monotonic() < end, runs
                tick.wait(0.1)
    finally:
        for s in servers:
            s.send_signal(signal.SIGTERM)
        errors = [s.communicate(timeout=60)[1] for s in servers]
    assert [s.returncode for s in servers] == [0, 0], errors
    with sbroker.Broker.open(database) as b:
        runs = list_runs(b, "hourly")
    assert len(runs) == 5 and {r["status"] for r in runs} == {"succeeded"}
