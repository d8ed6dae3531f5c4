"""Scripts written the way SQL Server's published Service Broker tutorials are (our own, in
tests/acceptance/cli/tutorials/), run unchanged through ``sbroker sql`` lesson by lesson on
both backends, with what those tutorials document: a request and its reply in one database;
internal activation of a procedure looping on WAITFOR (RECEIVE); two brokers over their
endpoints; poison messages disabling a queue after five rollbacks. Also the rule of
docs/tsql.md for when ``sbroker sql`` starts activation (a script does, ``-Q`` alone does
not, nor does any run while ``sbroker serve`` runs activation on the database), and that an
activated procedure cut off at the end of a run leaves no traceback on the terminal."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.tsql_cli import SqlRunner

import sbroker

LESSONS = Path(__file__).with_name("tutorials")


def lesson(name: str) -> str:
    return str(LESSONS / name)


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(result["columns"], row, strict=True)) for row in result["rows"]]


def run(sql: SqlRunner, *args: str) -> tuple[list[list[dict[str, Any]]], str]:
    """Result sets (as rows) and standard error of ``sbroker sql --json ARGS``, which must
    exit 0 and print no Python traceback."""
    done = sql.run("--json", *args, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return [rows(json.loads(line)) for line in done.stdout.splitlines()], done.stderr


@contextlib.contextmanager
def serving(db: str) -> Iterator[subprocess.Popen[str]]:
    """``sbroker serve`` on ``db`` until the block ends (it must stop cleanly, quietly)."""
    proc = subprocess.Popen([sys.executable, "-m", "sbroker.cli", "--db", db, "serve"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(60)
        assert line and line[0].startswith("sbroker: serving"), line
        yield proc
        proc.terminate()
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and "Traceback" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


def test_a_request_and_its_reply_in_one_database(sql: SqlRunner) -> None:
    results, _ = run(sql, *(lesson(f"request_reply_{n}.sql") for n in (
        "1_objects", "2_send", "3_reply", "4_finish", "5_cleanup")))
    [queues, sent, waiting, seen, received, replied, finished, left_open, left_over] = results
    assert queues == [{"name": "OrderInitiatorQueue"}, {"name": "OrderTargetQueue"}]
    request = "<OrderRequest><Title>Dune</Title><Copies>2</Copies></OrderRequest>"
    assert sent == [{"SentRequestMsg": request}] and waiting == [{"waiting": 1}]
    assert seen == [{"message_type_name": "//Bookshop/Orders/OrderRequest", "body": request}]
    reply = "<OrderReply><Title>Dune</Title><Status>reserved</Status></OrderReply>"
    assert received == [{"ReceivedRequestMsg": request}]
    assert replied == [{"SentReplyMsg": reply}]
    assert finished == [{"ReceivedReplyMsg": reply}] and left_open == [{"open_endpoints": 0}]
    assert left_over == [{"left_over": 0}]


def test_internal_activation_answers_within_the_run(sql: SqlRunner) -> None:
    # the procedure answers, then waits in WAITFOR (RECEIVE) until the run ends and cuts it
    # off: quietly, without a traceback on the terminal
    [queue, reply, checks], err = run(sql, lesson("activation_1_objects.sql"),
                                      lesson("activation_2_request.sql"))
    assert queue == [{"name": "StockTargetQueue", "is_activation_enabled": 1,
                      "max_queue_readers": 10}]
    assert reply == [{"ReceivedReplyMsg":
                      "<CheckReply><Title>Emma</Title><InStock>3</InStock></CheckReply>"}]
    assert checks == [{"checks": 1}] and err == ""
    looked, _ = run(sql, "-Q", Path(lesson("activation_3_look.sql")).read_text("utf-8"))
    assert looked == [[{"title": "Emma"}], [{"waiting": 0}], [{"running": 0}]]


SEND_CHECK = """
declare @h uniqueidentifier
begin dialog @h from service [//Bookshop/Stock/InitiatorService]
    to service N'//Bookshop/Stock/TargetService' on contract [//Bookshop/Stock/CheckContract]
send on conversation @h message type [//Bookshop/Stock/CheckRequest]
    (N'<CheckRequest><Title>Sanditon</Title></CheckRequest>')
"""


def test_a_query_starts_no_procedure_a_script_or_start_does(sql: SqlRunner) -> None:
    setup = Path(lesson("activation_1_objects.sql")).read_text("utf-8")
    results, _ = run(sql, "-Q", f"{setup}\ngo\n{SEND_CHECK}\ngo\n"
                                "select count(*) as n from StockTargetQueue\n"
                                "select count(*) as n from StockChecks")
    assert results[-2:] == [[{"n": 1}], [{"n": 0}]]  # the query started nothing
    [[checked]], _ = run(sql, "--start", "-Q",
                         "while not exists (select * from StockChecks)"
                         " waitfor delay '00:00:00.05'\n"
                         "select title from StockChecks")
    assert checked == {"title": "Sanditon"}


def test_with_a_serve_running_the_script_leaves_activation_to_it(sql: SqlRunner) -> None:
    run(sql, lesson("activation_1_objects.sql"))
    with serving(sql.db) as serve, sbroker.Broker.open(sql.db) as watcher:
        [served] = [row["session_id"] for row in watcher.view("dm_broker_sessions")
                    if row["pid"] == serve.pid]
        deadline = time.monotonic() + 30  # the serve's queue monitors, as sql looks for them
        while not any(row["session_id"] == served
                      for row in watcher.view("dm_broker_queue_monitors")):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        [reply, _], _ = run(sql, lesson("activation_2_request.sql"))
        assert reply[0]["ReceivedReplyMsg"].startswith("<CheckReply><Title>Emma")
        [[check]] = watcher.execute_tsql("select checked_by / 100000 as session"
                                         " from StockChecks")
    assert check["session"] == served  # the serve's activation answered, not the script's


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def test_two_brokers_over_their_endpoints(sql: SqlRunner, other_sql: SqlRunner,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SBROKER_ENDPOINT_SECRET", "a secret the two brokers share")
    target_port, initiator_port = free_ports(2)
    ports = ["-v", f"TargetPort={target_port}", "-v", f"InitiatorPort={initiator_port}"]
    target, initiator = other_sql, sql
    run(target, *ports, lesson("two_brokers_target.sql"))
    [route], _ = run(initiator, *ports, lesson("two_brokers_initiator.sql"))
    assert route == [{"name": "TargetRoute",
                      "remote_service_name": "//Bookshop/Remote/TargetService",
                      "address": f"tcp://127.0.0.1:{target_port}"}]
    with serving(target.db):  # the target's broker: its endpoint and its activation
        [answer], err = run(initiator, *ports, lesson("two_brokers_request.sql"))
    assert answer == [{"reply_type": "//Bookshop/Remote/PriceReply",
                       "reply": "<PriceReply><Price>12.50</Price></PriceReply>"}]
    assert err == ""


def test_poison_messages_disable_the_queue_after_five_rollbacks(sql: SqlRunner) -> None:
    results, err = run(sql, *(lesson(f"poison_{n}.sql") for n in (
        "1_objects", "2_send", "3_process", "4_remove")))
    [disabled, refused, told, enabled, waiting, shop] = results
    assert disabled == [{"is_receive_enabled": 0}]
    assert refused == [{"number": 9617}]  # the queue is disabled
    assert told == [{"message_type_name":
                     "http://schemas.microsoft.com/SQL/Notifications/EventNotification"}]
    assert enabled == [{"is_receive_enabled": 1}] and waiting == [{"waiting": 0}]
    assert shop == [{"message_type_name": "http://schemas.microsoft.com/SQL/ServiceBroker/Error"}]
    assert err == "cannot process three: conversion failed when converting 'three' to INT\n" * 5 \
        + "removing three\n"
