"""Activated T-SQL procedures and the end of their broker (docs/tsql.md, "Activation
procedures in T-SQL"): one stopped mid-transaction rolls back quietly, one line in the log and
no failure; one that fails reaches the log as SQL Server's error log shows it (number,
procedure, line), without a Python traceback, and counts as a failure. On both backends."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

import sbroker

Run = Callable[..., list[list[dict[str, Any]]]]
WAIT = 20.0

SETUP = """
create message type Job validation = none
create contract JobContract (Job sent by initiator)
create queue JobQueue
create queue WorkQueue
create service Jobs on queue JobQueue
create service Work on queue WorkQueue (JobContract)
create table Seen (spid int)
"""
SEND = """
declare @h uniqueidentifier
begin dialog @h from service Jobs to service 'Work' on contract JobContract
    with encryption = off
send on conversation @h message type Job (N'do it')
"""


def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def monitor(broker: sbroker.Broker) -> dict[str, Any]:
    [row] = [r for r in broker.view("dm_broker_queue_monitors") if r["queue_name"] == "WorkQueue"]
    return row


def test_a_procedure_stopped_with_its_broker_rolls_back_quietly(
        tsql: Run, broker: sbroker.Broker, caplog: pytest.LogCaptureFixture) -> None:
    tsql(SETUP + """
        go
        create procedure Worker as
        begin
            declare @h uniqueidentifier
            while 1 = 1
            begin
                begin tran
                waitfor (receive top (1) @h = conversation_handle from WorkQueue), timeout 50
                if @@rowcount = 0 begin commit continue end
                insert into Seen values (@@spid)
                print 'working'
                waitfor delay '00:05:00'
                commit
            end
        end
        go
        alter queue WorkQueue with activation (status = on, procedure_name = Worker,
                                               max_queue_readers = 1)
    """)
    caplog.set_level(logging.INFO, logger="sbroker")
    broker.start()
    tsql(SEND)
    until(lambda: "Worker: working" in caplog.messages, "the procedure to take the message")
    broker.stop()  # cuts the WAITFOR DELAY short: the procedure runs no further statement
    assert broker.activation.running_tasks() == 0
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    [stopped] = [m for m in caplog.messages if "stopped with its broker" in m]
    assert stopped.startswith("activated procedure Worker on queue WorkQueue stopped")
    [[state]] = tsql("select (select count(*) from Seen) as seen,"
                     " (select count(*) from WorkQueue) as waiting")
    assert state == {"seen": 0, "waiting": 1}  # rolled back: the message is back


def test_a_failing_procedure_is_logged_as_sql_servers_error_log_shows_it(
        tsql: Run, broker: sbroker.Broker, caplog: pytest.LogCaptureFixture) -> None:
    tsql(SETUP + """
        go
        create procedure Fails as
        begin
            declare @h uniqueidentifier
            waitfor (receive top (1) @h = conversation_handle from WorkQueue), timeout 100
            if @@rowcount = 0 return
            declare @n int = 1 / 0
        end
        go
        alter queue WorkQueue with activation (status = on, procedure_name = Fails,
                                               max_queue_readers = 1)
    """)
    broker.start()
    tsql(SEND)
    until(lambda: monitor(broker)["tasks_failed"] >= 1, "the procedure to fail")
    [failed] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert failed.exc_info is None  # a T-SQL error says what failed: no traceback
    assert failed.getMessage() == (
        "activated procedure failed: The activated proc 'Fails' running on queue 'WorkQueue'"
        " output the following: 'Msg 8134, Level 16, State 1, procedure Fails, line 6,"
        " column 13: Divide by zero error encountered.'")
    assert "Msg 8134" in monitor(broker)["last_error"]
