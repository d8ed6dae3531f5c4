"""Runs that outlive their driver, as a user runs them (docs/pipelines.md, "Running in
production"): ``--submit`` and ``runs wait``, ``runs cancel``, ``--from``, bad input (one
line, exit 2, nothing changed), a live driver refusing ``--resume`` by name, a server stopped
by SIGTERM handing its run back to the next one, and a skip-overlap schedule that goes on
after its server stopped mid-run.  Real processes where the behaviour needs them; the Python
tasks never touch Spark, so no JVM starts."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from sbroker.cli.main import main

pytestmark = pytest.mark.timeout(300)
DEADLINE = 90.0
TASKS = '''
import pathlib
import threading


def hold(spark, folder, name):
    """Say it started, then run until the test releases it (bounded)."""
    folder = pathlib.Path(folder)
    (folder / f"started-{name}").touch()
    tick = threading.Event()
    for _ in range(2400):
        if (folder / "release").exists():
            return name
        tick.wait(0.05)
    return "never released"
'''


def write(folder: Path, name: str = "held", extra: str = "") -> Path:
    (folder / "held_tasks.py").write_text(TASKS)
    path = folder / f"{name}.toml"
    path.write_text(textwrap.dedent(f'''
        [pipeline]
        name = "{name}"
        {extra}
        [[task]]
        name = "a"
        python = "held_tasks:hold"
        args = {{ folder = "{folder}", name = "a" }}
        [[task]]
        name = "b"
        python = "held_tasks:hold"
        after = ["a"]
        args = {{ folder = "{folder}", name = "b" }}
    '''))
    return path


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner(mix_stderr=False).invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def sbroker(folder: Path, db: Path, *args: str) -> subprocess.Popen[str]:
    """A process whose output goes to a file of the folder (read it when a test fails)."""
    with (folder / f"proc-{time.monotonic_ns()}.log").open("w") as log:
        return subprocess.Popen([sys.executable, "-m", "sbroker.cli", "--db", str(db), *args],
                                cwd=folder, stdout=log, stderr=subprocess.STDOUT, text=True,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))


def until(check: Callable[[], object], what: str) -> object:
    end = time.monotonic() + DEADLINE
    tick = threading.Event()
    while not (got := check()):
        assert time.monotonic() < end, what
        tick.wait(0.05)
    return got


def run_row(db: Path, run_id: int) -> dict[str, object]:
    code, out, err = cli("--db", str(db), "runs", "show", str(run_id), "--json")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def snapshot(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return list(conn.execute("SELECT * FROM PipelineRuns ORDER BY RunID")) + list(
            conn.execute("SELECT * FROM PipelineRunTasks ORDER BY RunID, Name"))


def one_line_exit_2(args: tuple[str, ...], says: str) -> None:
    code, out, err = cli(*args)
    assert code == 2, (out, err)
    [line] = err.strip().splitlines()
    assert line.startswith("sbroker: error: ") and says in line, line


def test_submit_wait_cancel_and_bad_input(tmp_path: Path) -> None:
    path, db = write(tmp_path), tmp_path / "run.db"
    one_line_exit_2(("--db", str(db), "run", str(path), "--submit", "--resume"),
                    "--submit records a new run: it cannot --resume")
    one_line_exit_2(("--db", str(db), "run", str(path), "--from", "a"),
                    "--from needs --resume")
    assert not db.exists()  # nothing was even opened
    code, out, err = cli("--db", str(db), "run", str(path), "--submit")
    assert code == 0 and out == "1\n", (out, err)  # the run id alone
    assert cli("--db", str(db), "runs", "wait", "1", "--timeout", "200ms")[0] == 124
    one_line_exit_2(("--db", str(db), "runs", "wait", "7"), "there is no run 7")
    one_line_exit_2(("--db", str(db), "runs", "cancel", "7"), "there is no run 7")
    before = snapshot(db)
    one_line_exit_2(("--db", str(db), "run", str(path), "--resume", "1", "--from", "nope"),
                    "--from names 'nope', which is not a task of pipeline 'held'")
    assert snapshot(db) == before
    code, out, _ = cli("--db", str(db), "runs", "cancel", "1")  # no server drives it
    assert code == 0 and out.strip() == "run 1 cancelled"
    one_line_exit_2(("--db", str(db), "runs", "cancel", "1"),
                    "run 1 is cancelled, not running: nothing to cancel")
    assert cli("--db", str(db), "runs", "wait", "1")[0] == 1
    shown = run_row(db, 1)
    assert shown["status"] == "cancelled" and shown["driver"] is None
    assert [t["status"] for t in shown["tasks"]] == ["pending", "pending"]  # type: ignore[attr-defined]
    (tmp_path / "release").touch()
    code, out, _ = cli("--db", str(db), "run", str(path), "--resume")
    assert code == 0, out
    code, out, _ = cli("--db", str(db), "run", str(path), "--resume")
    assert code == 0 and "every run of pipeline held succeeded: nothing to resume" in out
    assert cli("--db", str(db), "runs", "wait", "1")[0] == 0
    code, out, _ = cli("--db", str(db), "run", str(path), "--resume", "1", "--from", "b")
    assert code == 0 and "1 succeeded already and kept" in out
    assert [t["attempts"] for t in run_row(db, 1)["tasks"]] == [1, 2]  # type: ignore[attr-defined]
    code, out, _ = cli("--db", str(db), "runs", "show", "1")
    lines = out.strip().splitlines()
    assert len(lines) <= 8 and "taken over" not in lines[0], out  # one table, not blocks
    header = next(line for line in lines if "status" in line)
    assert [c.strip() for c in header.split("┃")[1:-1]] == [
        "task", "status", "attempts", "time", "value", "error"]


def test_a_live_driver_refuses_a_resume_and_a_killed_one_does_not(tmp_path: Path) -> None:
    path, db = write(tmp_path), tmp_path / "run.db"
    first = sbroker(tmp_path, db, "run", str(path))
    try:
        until(lambda: (tmp_path / "started-a").exists(), "a never started")
        code, _, err = cli("--db", str(db), "run", str(path), "--resume", "1")
        assert code == 2, err
        [line] = err.strip().splitlines()
        assert (f"run 1 is being driven by {socket.gethostname()} (pid {first.pid})"
                in line), line
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    (tmp_path / "release").touch()
    code, out, err = cli("--db", str(db), "run", str(path), "--resume", "1")
    assert code == 0, (out, err)
    assert run_row(db, 1)["takeovers"] == 1


def test_a_server_stopped_mid_run_hands_it_to_the_next_and_its_schedule_goes_on(
        tmp_path: Path) -> None:
    path = write(tmp_path, "every", '[schedule]\nevery = "1s"\noverlap = "skip"\n'
                                    '[options]\nlease = "2s"')
    db = tmp_path / "run.db"
    assert cli("--db", str(db), "schedule", "add", str(path))[0] == 0
    first = sbroker(tmp_path, db, "serve")
    until(lambda: (tmp_path / "started-a").exists(), "the schedule's first run never started")
    first.send_signal(signal.SIGTERM)  # mid-run
    assert first.wait(DEADLINE) == 0
    shown = run_row(db, 1)
    assert shown["status"] == "running" and shown["driver"] is None  # handed back
    second = sbroker(tmp_path, db, "serve")
    try:
        until(lambda: run_row(db, 1)["driver"] is not None, "the run was not taken over")
        (tmp_path / "release").touch()
        assert cli("--db", str(db), "runs", "wait", "1", "--timeout", "60s")[0] == 0
        assert run_row(db, 1)["takeovers"] == 1

        def later_run_succeeded() -> bool:
            code, out, _ = cli("--db", str(db), "runs", "--json")
            return any(r["run_id"] > 1 and r["status"] == "succeeded" for r in json.loads(out))

        until(later_run_succeeded, "no later tick of the schedule ran")
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(DEADLINE) == 0


def test_a_driving_run_cancelled_from_another_process_exits_1(tmp_path: Path) -> None:
    path, db = write(tmp_path), tmp_path / "run.db"
    proc = sbroker(tmp_path, db, "run", str(path))
    try:
        until(lambda: (tmp_path / "started-a").exists(), "a never started")
        code, out, err = cli("--db", str(db), "runs", "cancel", "1")
        assert code == 0 and f"cancel asked of its driver {socket.gethostname()} (pid " \
            f"{proc.pid})" in out, (out, err)
        assert proc.wait(DEADLINE) == 1  # though its task's code never returns
    finally:
        (tmp_path / "release").touch()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    shown = run_row(db, 1)
    assert shown["status"] == "cancelled"
    assert [t["status"] for t in shown["tasks"]] == ["cancelled", "pending"]  # type: ignore[attr-defined]


def test_a_run_paused_past_its_lease_is_taken_over_and_followed_to_its_end(
        tmp_path: Path) -> None:
    path, db = write(tmp_path, "paused", '[options]\nlease = "1s"'), tmp_path / "run.db"
    proc = sbroker(tmp_path, db, "run", str(path))
    server = None
    try:
        until(lambda: (tmp_path / "started-a").exists(), "a never started")
        proc.send_signal(signal.SIGSTOP)  # past its lease: a server takes the run over
        server = sbroker(tmp_path, db, "serve")
        until(lambda: run_row(db, 1)["takeovers"] == 1, "the run was not taken over")
        proc.send_signal(signal.SIGCONT)  # its task goes on: it was paused with it
        (tmp_path / "release").touch()
        assert proc.wait(DEADLINE) == 0  # it followed the run to its end
    finally:
        for p in (proc, server):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGTERM)
                p.wait(DEADLINE)
    out = "".join(f.read_text() for f in sorted(tmp_path.glob("proc-*.log")))
    assert "another process drives it now" in out and "run 1 ended succeeded" in out
    assert run_row(db, 1)["status"] == "succeeded"
