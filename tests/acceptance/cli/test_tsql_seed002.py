"""Seed 002's scheduler script and its test batch run unchanged through ``sbroker sql``
(SPEC §14): the activation procedure is a T-SQL procedure that activation starts; each
stage's tasks run at once on activated readers; ExecutionLog ends with ten rows carrying their
readers' @@SPID and times; ExecutionStatus answers while the test runs."""

from __future__ import annotations

import datetime as dt
import subprocess

import pytest
from support.tsql_cli import SCRIPTS, SqlRunner

import sbroker

STAGES = [4, 2, 1, 2, 1]
DELAYS = [10.1, 9.2, 8.3, 7.4, 6.5]


@pytest.mark.slow
def test_seed_002_runs_as_written(sql: SqlRunner) -> None:
    setup = sql.run(str(SCRIPTS / "seed002_scheduler.sql"))
    assert setup.returncode == 0, setup.stderr
    test = subprocess.Popen(
        sql.command(str(SCRIPTS / "seed002_test.sql")), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    running: list[dict[str, object]] = []
    with sbroker.Broker.open(sql.db) as watcher:
        while not running:  # ExecutionStatus shows the first stage's tasks as they run
            [rows] = watcher.execute_tsql("select * from ExecutionStatus where LogID is not null")
            running = rows
            try:
                test.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                continue
            break
        out, err = test.communicate(timeout=300)
        assert test.returncode == 0, err
        assert running and {"logid", "spid", "callerid", "starttime", "endtime",
                            "sql"} <= {name.lower() for name in running[0]}
        [log] = watcher.execute_tsql("select LogID, CallerID, SPID, StartTime, EndTime, SQL"
                                     " from ExecutionLog order by LogID")
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
