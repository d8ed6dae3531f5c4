"""The external activator with real OS processes: notifications start worker processes,
never more than the maximum per queue, and the backlog is processed exactly once."""

from __future__ import annotations

import sqlite3
import sys
import threading
import time
from pathlib import Path

import pytest

from sbroker import Broker, FakeClock
from sbroker.cli.activator import run_activator
from sbroker.services.activation.external import ExternalActivator, subscribe

WORKER = """
import os, sys, time
from sbroker import Broker
b = Broker.open(os.environ["SBROKER_DATABASE"])
try:
    while True:
        with b.transaction() as tx:
            msgs = tx.receive(os.environ["SBROKER_QUEUE"], timeout=0.5)
            for m in msgs:
                tx.execute("INSERT INTO done(body, pid) VALUES (?, ?)", (m.text(), os.getpid()))
        if not msgs:
            break
        time.sleep(0.02)
finally:
    b.close()
"""


def rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db, timeout=30)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.mark.slow
def test_activator_starts_worker_processes_up_to_the_maximum(tmp_path: Path) -> None:
    db = tmp_path / "broker.db"
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    with Broker.open(db) as b:
        b.create_queue("InitQ")
        b.create_service("Init", "InitQ")
        b.create_queue("Work")
        b.create_service("WorkSvc", "Work", ["DEFAULT"])
        with b.transaction() as tx:
            tx.execute("CREATE TABLE done (body TEXT, pid INTEGER)")
    stop = threading.Event()
    result: list[object] = []

    def activator() -> None:
        result.append(run_activator(
            db, "ActivatorQ", {"Work": [sys.executable, str(worker)]}, max_per_queue=2,
            monitor_interval=0.3, stop=stop, poll_seconds=0.1))

    thread = threading.Thread(target=activator)
    thread.start()
    try:
        with Broker.open(db) as b:
            deadline = time.monotonic() + 30  # the activator's setup runs in its thread
            while not any(n[0] == "sbroker-activator:Work" for n in b.catalog.notifications):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            with b.transaction() as tx:
                for i in range(40):
                    tx.send(tx.begin_dialog("Init", "WorkSvc"), body=f"m{i}")
        deadline = time.monotonic() + 60
        while rows(db, "SELECT count(*) FROM done")[0][0] < 40:
            assert time.monotonic() < deadline, "the workers did not drain the queue"
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join(60)
    stats = result[0]
    bodies = sorted(str(r[0]) for r in rows(db, "SELECT body FROM done"))
    assert bodies == sorted(f"m{i}" for i in range(40))  # each exactly once
    assert stats.started >= 1 and stats.failed == 0  # type: ignore[attr-defined]
    assert stats.peak["Work"] <= 2  # type: ignore[attr-defined]


class FakeProc:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.code: int | None = None

    def poll(self) -> int | None:
        return self.code


def test_the_activator_respects_the_maximum_and_restarts_nothing_by_itself(
        tmp_path: Path) -> None:
    clock = FakeClock()
    b = Broker.open(tmp_path / "b.db", clock=clock, monitor_interval=5)
    try:
        b.create_queue("InitQ")
        b.create_service("Init", "InitQ")
        b.create_queue("Work")
        b.create_service("WorkSvc", "Work", ["DEFAULT"])
        subscribe(b, "ActivatorQ", ["Work"])
        subscribe(b, "ActivatorQ", ["Work"])  # idempotent
        procs: list[FakeProc] = []
        seen: list[tuple[list[str], str]] = []

        def popen(argv: list[str], env: dict[str, str]) -> FakeProc:
            seen.append((argv, env["SBROKER_QUEUE"]))
            procs.append(FakeProc(1000 + len(procs)))
            return procs[-1]

        act = ExternalActivator(b, "ActivatorQ", {"Work": "worker --fast"}, max_per_queue=2,
                                popen=popen)  # type: ignore[arg-type]
        svc = b._activation
        b.start()
        with b.transaction() as tx:
            tx.send(tx.begin_dialog("Init", "WorkSvc"), body="x")
        assert svc.sync()
        assert act.poll_once() == 1
        assert seen == [(["worker", "--fast"], "Work")]
        assert act.poll_once() == 0  # NOTIFIED: no second notification yet
        clock.advance(5)  # nobody received: notified again, a second process
        assert svc.sync() and act.poll_once() == 1
        clock.advance(5)
        assert svc.sync() and act.poll_once() == 0  # at the maximum
        assert act.stats.ignored == 1 and act.running("Work") == 2
        procs[0].code = 0
        procs[1].code = 3
        assert act.running() == 0
        assert act.stats.exited_ok == 1 and act.stats.failed == 1
        assert act.poll_once() == 0  # exited processes are not restarted by themselves
        clock.advance(5)
        assert svc.sync() and act.poll_once() == 1  # a new notification starts a new one
        assert act.stats.started == 3 and act.stats.peak == {"Work": 2}
    finally:
        b.close()
