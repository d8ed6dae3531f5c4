"""Many processes on one PostgreSQL database, each with its own pool (as on many hosts):
competing readers, a killed reader's group freed, wake-ups across processes, background work
done once however many brokers are started, executors of several processes sharing a stage
(docs/postgresql.md)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
from support.helpers import Child

import sbroker
from sbroker import Broker
from sbroker.apps.scheduler import recover_dead_tasks
from sbroker.apps.scheduler.executor import report_dead_task
from sbroker.apps.spark.stub import StubRunner


def _send(b: Broker, *bodies: str) -> str:
    """One new conversation carrying ``bodies``; its initiator handle."""
    with b.transaction() as tx:
        handle = tx.begin_dialog("InitService", "TargetService")
        for body in bodies:
            tx.send(handle, body=body)
    return handle


def test_a_group_held_by_another_process_is_not_handed_out_and_others_go_on(
        pg_pair: Broker, pg_url: str, spawn: Callable[..., Child]) -> None:
    _send(pg_pair, "a1", "a2")
    _send(pg_pair, "b1")
    child = spawn("hold-receive", pg_url, "TargetQueue")
    held = child.expect("received")
    assert [r["body"] for r in held] == ["a1", "a2"]
    with pg_pair.transaction() as tx:  # the other group, at once, without waiting
        assert [m.text() for m in tx.receive("TargetQueue")] == ["b1"]
        assert tx.receive("TargetQueue") == []  # a1, a2 stay with the child
    [group] = [g for g in pg_pair.view("conversation_groups") if g["is_locked"]]
    assert group["conversation_group_id"] == held[0]["group"]
    assert pg_pair.queue_metrics()[1]["locked"] == 2
    child.tell("commit")
    child.expect("finished")
    assert pg_pair.peek("TargetQueue") == []


def test_a_reader_killed_mid_transaction_frees_its_group_within_seconds(
        pg_pair: Broker, pg_url: str, spawn: Callable[..., Child]) -> None:
    _send(pg_pair, "work")
    child = spawn("hold-receive", pg_url, "TargetQueue")
    assert [r["body"] for r in child.expect("received")] == ["work"]
    with pg_pair.transaction() as tx:
        assert tx.receive("TargetQueue") == []
    child.kill9()
    killed = time.monotonic()
    with pg_pair.transaction() as tx:  # waits; the lock dies with the child's connection
        got = tx.receive("TargetQueue", timeout=30)
    assert [m.text() for m in got] == ["work"]
    assert time.monotonic() - killed < 5.0
    # Its session is reaped too (no lock, no heartbeat for a few seconds).
    deadline = time.monotonic() + 30
    while len(pg_pair.view("dm_broker_sessions")) > 1:
        assert time.monotonic() < deadline, pg_pair.view("dm_broker_sessions")
        time.sleep(0.1)


def test_a_waiting_receive_in_another_process_wakes_within_milliseconds_of_a_commit(
        pg_pair: Broker, pg_url: str, spawn: Callable[..., Child]) -> None:
    # The child's waiters look again only every 60 s: only the NOTIFY can wake it sooner.
    child = spawn("wait-receive", pg_url, "TargetQueue", "120",
                  env={"SBROKER_RECHECK": "60"})
    child.expect("parked")
    _send(pg_pair, "ping")
    done = time.monotonic()
    got = child.expect("received")
    assert [r["body"] for r in got["rows"]] == ["ping"]
    # Milliseconds on an idle machine; generous for a loaded 2-core one.
    assert got["at"] - done < 2.0, got["at"] - done


def test_two_brokers_started_at_once_fire_each_timer_and_end_each_lifetime_once(
        pg_pair: Broker, pg_url: str, spawn: Callable[..., Child]) -> None:
    timers = []
    with pg_pair.transaction() as tx:
        for _ in range(20):
            handle = tx.begin_dialog("InitService", "TargetService")
            tx.begin_conversation_timer(handle, 1.0)
            timers.append(handle)
        for _ in range(10):
            short = tx.begin_dialog("InitService", "TargetService", lifetime=1)
            tx.send(short, body="first")  # the target endpoint exists: both sides expire
    children = [spawn("start-broker", pg_url) for _ in range(2)]
    for child in children:
        child.expect("started")
    deadline = time.monotonic() + 30

    def count(kind: str) -> int:
        return sum(m.message_type_name == kind for q in ("InitQueue", "TargetQueue")
                   for m in pg_pair.peek(q))

    while count(sbroker.DIALOG_TIMER) < 20 or count(sbroker.ERROR) < 20:
        assert time.monotonic() < deadline, (count(sbroker.DIALOG_TIMER), count(sbroker.ERROR))
        time.sleep(0.05)
    for child in children:  # nothing more can fire once both are stopped
        child.tell("stop")
        assert child.finish() == 0
    fired = [m.conversation_handle for m in pg_pair.peek("InitQueue")
             if m.message_type_name == sbroker.DIALOG_TIMER]
    assert sorted(fired) == sorted(timers)
    errors = [m for q in ("InitQueue", "TargetQueue") for m in pg_pair.peek(q)
              if m.message_type_name == sbroker.ERROR]
    assert len(errors) == 20 and len({m.conversation_handle for m in errors}) == 20
    assert all(m.error()[0] == -8489 for m in errors)


def test_four_executor_processes_share_a_stage_and_the_log_names_each_host_and_worker(
        pg_url: str, spawn: Callable[..., Child], tmp_path: Path) -> None:
    with Broker.open(pg_url) as b:
        b.install_executor(max_queue_readers=1)  # the objects, before the children start
        children = [spawn("executor", pg_url, "1", monitor_interval=0.2) for _ in range(4)]
        pids = {child.expect("started")["pid"] for child in children}
        with b.scheduler("stage", max_concurrency=4) as s:
            for _ in range(4):
                s.exec_async(sbroker.PythonTask("child:barrier_task", folder=str(tmp_path),
                                                count=4))
            results = s.wait_all()
        ran = {r.value["pid"] for r in results}
        assert ran == pids  # one task per process: each ran while the others did
        log = b.view("ExecutionLog")
        assert [r["Status"] for r in log] == ["succeeded"] * 4
        hosts = {r["Worker"].split(":")[0] for r in log}
        assert hosts == {__import__("socket").gethostname()}
        assert {int(r["Worker"].split(":")[1]) for r in log} == pids
        tasks = b.view("dm_broker_activated_tasks")
        assert {t["pid"] for t in tasks} <= pids and all(t["host"] for t in tasks)
        for child in children:
            child.tell("stop")
            assert child.finish() == 0


def test_brokers_started_at_once_run_the_endpoint_and_its_transmitter_in_one_session(
        pg_pair: Broker, pg_url: str, spawn: Callable[..., Child]) -> None:
    pg_pair.create_endpoint(port=0, secret="a long shared secret", encryption="disabled")
    children = [spawn("start-broker", pg_url) for _ in range(3)]
    sessions = {child.expect("started")["session"] for child in children}
    with pg_pair.db.connection() as conn:
        owner, port = conn.query_one(
            "SELECT owner_session, listening_port FROM sb_net_endpoint")  # type: ignore[misc]
    assert owner in sessions and port
    for child in children:
        child.tell("stop")
        assert child.finish() == 0
    with pg_pair.db.connection() as conn:
        assert conn.query_one("SELECT owner_session FROM sb_net_endpoint") == (None,)


def test_two_hosts_finding_one_dead_executor_s_task_report_it_failed_once(
        pg_url: str) -> None:
    with Broker.open(pg_url) as a, Broker.open(pg_url) as b:
        a.install_executor(max_queue_readers=1, runner=StubRunner())
        with a.scheduler() as s:
            log_id = s.exec_async("SELECT 1")
            # An executor in a process that died: it took the task, then vanished.
            with a.transaction() as tx:
                [msg] = tx.receive("QueueAsyncTarget")
                handle = msg.conversation_handle
                tx.execute("UPDATE ExecutionLog SET Status = 'running', WorkerSession = -1,"
                           " TargetHandle = %s WHERE LogID = %s", (handle, log_id))
            # Host a reports it and has not committed yet when host b finds it too.
            outcome: list[int] = []
            with a.transaction() as tx_a:
                assert report_dead_task(a, tx_a, log_id, handle, -1)
                other = threading.Thread(target=lambda: outcome.append(recover_dead_tasks(b)))
                other.start()
                _until_a_backend_waits_for_a_lock(pg_url, other)
            other.join(timeout=30)
            assert outcome == [0]  # b waited for a's row lock, then found nothing to report
            result = s.synchronize(timeout=30)
            assert result.status == "failed" and "died" in (result.error or "")
            assert recover_dead_tasks(b) == 0
        assert [r["Status"] for r in a.view("ExecutionLog")] == ["failed"]


def _until_a_backend_waits_for_a_lock(url: str, thread: threading.Thread) -> None:
    """Poll the server (nothing else can tell) until a session waits for a lock, or the
    thread ended without waiting (the test then fails on what it did)."""
    deadline = time.monotonic() + 30
    with psycopg.connect(url, autocommit=True) as conn:
        while thread.is_alive() and time.monotonic() < deadline:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity"
                               " WHERE wait_event_type = 'Lock'").fetchone()
            if row and row[0]:
                return
            time.sleep(0.01)
