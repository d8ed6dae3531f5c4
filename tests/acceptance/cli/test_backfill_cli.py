"""``sbroker schedule backfill NAME --from T1 --to T2 [--reprocess] [--parallel] [--submit]``
as a user runs it (docs/pipelines.md, "Data intervals and backfills"): exit codes, the runs
and the times they are for, SIGTERM (a real process), and bad input as one line, exit 2,
nothing started.  The Python tasks never touch Spark, so no JVM starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from sbroker.cli.main import main

TASKS = '''
import pathlib


def load(spark, day, at, fail_days):
    """Loads one day; fails for the days listed in the file fail_days."""
    path = pathlib.Path(fail_days)
    if path.exists() and day in path.read_text().split():
        raise RuntimeError(f"no data for {day}")
    return {"day": day, "at": at}
'''


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner(mix_stderr=False).invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def daily(tmp_path: Path) -> str:
    """A broker database with the schedule `daily` (02:00 in Paris); its path."""
    (tmp_path / "daily_tasks.py").write_text(TASKS)
    path = tmp_path / "daily.toml"
    path.write_text(f'''[pipeline]
name = "daily"
[schedule]
cron = "0 2 * * *"
timezone = "Europe/Paris"
[[task]]
name = "load"
python = "daily_tasks:load"
[task.args]
day = "${{scheduled_date}}"
at = "${{scheduled_for}}"
fail_days = "{tmp_path / 'fail_days.txt'}"
''')
    db = str(tmp_path / "runs.db")
    assert cli("--db", db, "init")[0] == 0
    assert cli("--db", db, "schedule", "add", str(path))[0] == 0
    return db


def runs(db: str) -> list[dict[str, object]]:
    code, out, _ = cli("--db", db, "runs", "--json")
    assert code == 0
    return list(json.loads(out))


@pytest.mark.parametrize(("args", "message"), [
    (["nightly", "--from", "2026-01-01", "--to", "2026-01-08"], "no schedule 'nightly'"),
    (["daily", "--from", "2026-01-08", "--to", "2026-01-01"], "--to 2026-01-01 comes before"),
    (["daily", "--from", "last week", "--to", "2026-01-08"], "--from: 'last week' is not an"),
    (["daily", "--from", "2026-01-01", "--to", "2026-01-08", "--parallel", "0"],
     "--parallel must be an integer >= 1"),
    (["daily", "--from", "2026-01-01", "--to", "2026-01-08", "--reprocess", "maybe"],
     "--reprocess must be none, failed or all, not 'maybe'"),
    (["daily", "--from", "2026-01-01"], "give the range of ticks with --from T1 --to T2"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_starts(daily: str, args: list[str],
                                                         message: str) -> None:
    code, out, err = cli("--db", daily, "schedule", "backfill", *args)
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and message in err and err.startswith("sbroker: error: ")
    assert out == "" and runs(daily) == []


def test_a_week_backfilled_once_then_a_failed_day_again(daily: str, tmp_path: Path) -> None:
    (tmp_path / "fail_days.txt").write_text("2026-01-03\n")
    week = ("--db", daily, "schedule", "backfill", "daily", "--from", "2026-01-01",
            "--to", "2026-01-08")
    code, out, err = cli(*week, "--parallel", "2")
    assert code == 1, (out, err)  # one day failed
    assert "backfill daily: 6 of 7 runs succeeded, 0 ticks skipped" in out
    week_runs = sorted(runs(daily), key=lambda r: str(r["scheduled_for"]))
    assert [r["scheduled_for"] for r in week_runs] == [
        f"2026-01-0{d}T02:00:00+01:00" for d in range(1, 8)]
    assert [r["status"] for r in week_runs].count("failed") == 1

    (tmp_path / "fail_days.txt").write_text("")
    code, out, _ = cli(*week)  # reprocess none: every tick has its run
    assert code == 0 and "0 of 0 runs succeeded, 7 ticks skipped" in out
    code, out, _ = cli(*week, "--reprocess", "failed")
    assert code == 0 and "1 of 1 run succeeded, 6 ticks skipped" in out
    again = runs(daily)
    assert len(again) == 7 and {r["status"] for r in again} == {"succeeded"}
    failed_day = next(r for r in again if r["scheduled_for"] == "2026-01-03T02:00:00+01:00")
    code, out, _ = cli("--db", daily, "runs", "show", str(failed_day["run_id"]), "--json")
    shown = json.loads(out)
    assert shown["scheduled_for"] == "2026-01-03T02:00:00+01:00"
    assert shown["tasks"][0]["value"] == {"day": "2026-01-03",
                                          "at": "2026-01-03T02:00:00+01:00"}
    assert shown["tasks"][0]["attempts"] == 2


def test_submit_prints_the_ids_and_a_range_with_no_tick_says_so(daily: str) -> None:
    code, out, err = cli("--db", daily, "schedule", "backfill", "daily", "--from",
                         "2026-02-01", "--to", "2026-02-03", "--submit")
    assert code == 0, err
    ids = [int(line) for line in out.split()]
    assert len(ids) == 2
    assert {r["run_id"]: r["status"] for r in runs(daily)} == dict.fromkeys(ids, "running")
    code, out, err = cli("--db", daily, "schedule", "backfill", "daily", "--from",
                         "2026-02-01T03:00", "--to", "2026-02-02T01:00")
    assert code == 0 and out.startswith("backfill daily: no tick of the schedule"), err


HOLD = '''
import pathlib
import threading


def hold(spark, folder, day):
    """Say it started, then run until the test releases it (bounded)."""
    folder = pathlib.Path(folder)
    (folder / "started").touch()
    tick = threading.Event()
    for _ in range(1200):
        if (folder / "release").exists():
            return day
        tick.wait(0.05)
    return "never released"
'''


def test_sigterm_cancels_the_runs_going_and_reprocess_failed_finishes(tmp_path: Path) -> None:
    (tmp_path / "hold_tasks.py").write_text(HOLD)
    path = tmp_path / "held.toml"
    path.write_text(f'[pipeline]\nname = "held"\n[schedule]\nevery = "24h"\n[[task]]\n'
                    f'name = "h"\npython = "hold_tasks:hold"\n'
                    f'args = {{ folder = "{tmp_path}", day = "${{scheduled_date}}" }}\n')
    db = str(tmp_path / "runs.db")
    assert cli("--db", db, "schedule", "add", str(path))[0] == 0
    week = ["--db", db, "schedule", "backfill", "held", "--from", "2026-01-01", "--to",
            "2026-01-03"]
    proc = subprocess.Popen([sys.executable, "-m", "sbroker.cli", *week], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    end = time.monotonic() + 60
    while not (tmp_path / "started").exists():
        assert proc.poll() is None and time.monotonic() < end, proc.communicate()
        threading.Event().wait(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.stderr is not None
    said = proc.stderr.readline()  # once the run is put away, before the executor stops
    assert "interrupted; the runs going were cancelled" in said
    (tmp_path / "release").touch()  # the task ignores cancel: let its reader go at once
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, (out, err)
    assert [r["status"] for r in runs(db)] == ["cancelled"]  # the second tick never began
    code, out, _ = cli(*week, "--reprocess", "failed")
    assert code == 0 and "2 of 2 runs succeeded" in out, out
