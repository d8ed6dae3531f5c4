"""Seed 002's scheduler script and its test batch run unchanged through ``sbroker sql``
(docs/tsql.md): the activation procedure is a T-SQL procedure that activation starts; each
stage's tasks run at once on activated readers; ExecutionLog ends with ten rows carrying their
readers' @@SPID and times; ExecutionStatus answers while the test runs."""

from __future__ import annotations

import datetime as dt
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.postgres import RunServer
from support.tsql_cli import SCRIPTS, SqlRunner

import sbroker

STAGES = [4, 2, 1, 2, 1]
DELAYS = [10.1, 9.2, 8.3, 7.4, 6.5]


@pytest.mark.slow
def test_seed_002_runs_as_written_on_both_backends_at_once(tmp_path: Path,
                                                            postgres: RunServer) -> None:
    """One run per backend, side by side: each is the seed's 41.5 s of WAITFOR DELAY, and
    neither needs the machine to itself (its tasks mostly wait)."""
    url = postgres.new_database()
    try:
        runs = [SeedRun(SqlRunner(str(tmp_path / "broker.db"))), SeedRun(SqlRunner(url))]
        for run in runs:
            run.start()
        with ThreadPoolExecutor(len(runs)) as pool:  # each watches its run while it runs
            for done in [pool.submit(run.check) for run in runs]:
                done.result()
    finally:
        postgres.drop(url)


class SeedRun:
    """Seed 002's setup script, then its test batch in a process of its own, on one database;
    :meth:`check` watches ExecutionStatus until the first stage runs and checks the log."""

    def __init__(self, sql: SqlRunner) -> None:
        self.sql = sql
        self.test: subprocess.Popen[str] | None = None

    def start(self) -> None:
        setup = self.sql.run(str(SCRIPTS / "seed002_scheduler.sql"))
        assert setup.returncode == 0, (self.sql.db, setup.stderr)
        self.test = subprocess.Popen(
            self.sql.command(str(SCRIPTS / "seed002_test.sql")), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)

    def check(self) -> None:
        test = self.test
        assert test is not None
        running: list[dict[str, object]] = []
        with sbroker.Broker.open(self.sql.db) as watcher:
            while not running:  # ExecutionStatus shows the first stage's tasks as they run
                [rows] = watcher.execute_tsql(
                    "select * from ExecutionStatus where LogID is not null")
                running = rows
                try:
                    test.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    continue
                break
            _, err = test.communicate(timeout=300)
            assert test.returncode == 0, (self.sql.db, err)
            assert running and {"logid", "spid", "callerid", "starttime", "endtime",
                                "sql"} <= {name.lower() for name in running[0]}
            [log] = watcher.execute_tsql("select LogID, CallerID, SPID, StartTime, EndTime,"
                                         " SQL from ExecutionLog order by LogID")
        check_log(log)


def check_log(log: list[dict[str, object]]) -> None:
    """Ten rows, one caller, each stage's tasks on readers of their own, run concurrently,
    each at least its delay long."""
    assert len(log) == 10
    callers = {row["CallerID"] for row in log}
    spids = {row["SPID"] for row in log}
    assert len(callers) == 1 and callers.isdisjoint(spids)
    start = 0
    for tasks, delay in zip(STAGES, DELAYS, strict=True):
        stage = log[start:start + tasks]
        start += tasks
        begins = [dt.datetime.fromisoformat(str(row["StartTime"])) for row in stage]
        ends = [dt.datetime.fromisoformat(str(row["EndTime"])) for row in stage]
        assert len({row["SPID"] for row in stage}) == tasks  # one reader per task
        for began, ended in zip(begins, ends, strict=True):
            assert (ended - began).total_seconds() >= delay
        # concurrently: every task of the stage started before any of them ended
        assert max(begins) < min(ends)
