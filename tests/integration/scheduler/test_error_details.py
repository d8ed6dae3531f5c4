"""A failed task keeps its traceback: ExecutionLog.ErrorDetails and TaskResult.error_details."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support.helpers import database_at

import sbroker
from sbroker.apps.spark import StubRunner


def test_a_failed_python_task_keeps_its_traceback(
        executor: sbroker.Broker, make_readers: type) -> None:
    readers = make_readers(executor, 1)
    try:
        with executor.scheduler() as s:
            log_id = s.exec_async(sbroker.PythonTask("scheduler_task_helpers:kaboom"))
            with pytest.raises(sbroker.TaskFailed) as failed:
                s.wait_all(timeout=60)
    finally:
        readers.close()
    [result] = failed.value.results
    assert result.error == "ValueError: kaboom"  # the one line stays one line
    details = result.error_details or ""
    assert details.startswith("Traceback") and "in _check" in details
    assert details.rstrip().endswith("ValueError: kaboom")
    [row] = [r for r in executor.view("ExecutionLog") if r["LogID"] == log_id]
    assert row["ErrorDetails"] == details


def test_an_execution_log_made_before_error_details_gets_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    database_at(path, 5)  # before migration 6 added the column
    with sqlite3.connect(path) as conn:  # the ExecutionLog of that version
        conn.execute("DROP VIEW IF EXISTS ExecutionStatus")
        conn.execute("DROP TABLE IF EXISTS ExecutionLog")
        conn.execute(
            "CREATE TABLE ExecutionLog (LogID INTEGER PRIMARY KEY AUTOINCREMENT,"
            " CallerID TEXT NOT NULL, SchedulerHandle TEXT NOT NULL, Worker TEXT,"
            " WorkerSession INTEGER, Task TEXT NOT NULL, QueuedTime TEXT NOT NULL,"
            " StartTime TEXT, EndTime TEXT, Status TEXT NOT NULL DEFAULT 'queued', Error TEXT,"
            " SparkJobIds TEXT, Value TEXT, Pool TEXT,"
            " CancelRequested INTEGER NOT NULL DEFAULT 0, TargetHandle TEXT)")
        conn.execute("INSERT INTO ExecutionLog(CallerID, SchedulerHandle, Task, QueuedTime,"
                     " Status, Error) VALUES ('old', 'h', '{}', '2026-01-01', 'failed', 'x')")
    with sbroker.Broker.open(path) as b:
        b.install_executor(runner=StubRunner())
        [old] = b.view("ExecutionLog")
        assert old["Error"] == "x" and old["ErrorDetails"] is None
