"""Commands an operator uses: status with message counts and the scheduler's log, queue
enable after poison, peek, endpoint and route, Spark options of run; local date-times and
tables that fit 80 columns."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

from click.testing import CliRunner
from support.helpers import Child, make_pair

import sbroker
from sbroker.apps.spark import StubRunner
from sbroker.cli.main import main

EPOCH = re.compile(r"\b1\d{9}\.\d+")
LOCAL = re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\b")


def run(db: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner(mix_stderr=False).invoke(main, ["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


def shop(path: Path) -> sbroker.Broker:
    b = sbroker.Broker.open(path)
    b.create_queue("Orders")
    b.create_service("Shop", "Orders", ["DEFAULT"])
    return b


def test_status_shows_ready_and_locked_messages_per_queue(tmp_path: Path) -> None:
    db = tmp_path / "shop.db"
    with shop(db) as b:
        with b.transaction() as tx:
            held = tx.begin_dialog("Shop", "Shop")
            tx.send(held, body="a")
            tx.send(held, body="b")
            tx.send(tx.begin_dialog("Shop", "Shop"), body="c")
        reader = b.transaction()  # holds the first conversation's group while status runs
        assert [m.text() for m in reader.receive("Orders", top=1)] == ["a"]
        with b.transaction() as tx:  # any commit writes the lock row for other processes
            tx.execute("CREATE TABLE IF NOT EXISTS unrelated (x)")
        code, out, _ = run(db, "status")
        reader.rollback()
    assert code == 0
    [line] = [x for x in out.splitlines() if "Orders" in x]
    assert line.split()[:3] == ["Orders", "1", "2"]  # c ready; a and b in the locked group


def test_status_shows_the_readers_another_process_runs(tmp_path: Path) -> None:
    db = tmp_path / "busy.db"
    make_pair(sbroker.Broker.open(db)).close()
    child = Child("activate-hold", db, "TargetQueue")  # an activated reader, holding
    try:
        child.expect("running")
        code, out, _ = run(db, "status")
    finally:
        child.kill9()
        child.close()
    assert code == 0
    [line] = [x for x in out.splitlines() if "TargetQueue" in x]
    assert "1 of 1" in line, out


def test_status_shows_the_scheduler_log_with_local_times(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    with sbroker.Broker.open(db) as b:
        b.install_executor(runner=StubRunner())
        with b.scheduler("nightly") as s:
            s.exec_async("SELECT 42")
            s.cancel(next(iter(s._in_flight)))
        code, out, _ = run(db, "status")
    assert code == 0
    assert "ExecutionLog: 1 task(s)" in out and "SELECT 42" in out
    code, out, _ = run(db, "status", "conversation_endpoints", "ExecutionLog")
    assert code == 0 and LOCAL.search(out) and not EPOCH.search(out)
    assert "T" not in "".join(LOCAL.findall(out))


def test_every_table_fits_80_columns(tmp_path: Path) -> None:
    db = tmp_path / "wide.db"
    with shop(db) as b, b.transaction() as tx:
        tx.send(tx.begin_dialog("Shop", "Shop"), body="x" * 200)
    for args in (["status"], ["status", "conversation_endpoints", "transmission_queue",
                              "service_queues", "routes"], ["queue", "list"]):
        code, out, _ = run(db, *args)
        assert code == 0
        assert max(len(line) for line in out.splitlines()) <= 80, out


def test_queue_enable_brings_back_a_queue_disabled_by_poison(tmp_path: Path) -> None:
    db = tmp_path / "poison.db"
    with shop(db) as b:
        with b.transaction() as tx:
            tx.send(tx.begin_dialog("Shop", "Shop"), body="bad")
        for _ in range(5):  # five rolled-back receives disable the queue
            tx = b.transaction()
            tx.receive("Orders")
            tx.rollback()
        assert b.view("service_queues")[0]["is_receive_enabled"] == 0
    code, out, _ = run(db, "status")
    assert "sbroker queue enable Orders" in out
    code, out, _ = run(db, "queue", "enable", "Orders")
    assert code == 0 and "1 message(s) ready" in out
    code, out, _ = run(db, "receive", "Orders")
    assert json.loads(out)["body"] == "bad"


def test_peek_shows_messages_without_receiving_them(tmp_path: Path) -> None:
    db = tmp_path / "peek.db"
    with shop(db) as b, b.transaction() as tx:
        h = tx.begin_dialog("Shop", "Shop")
        tx.send(h, body="first")
        tx.send(h, body="second")
    code, out, _ = run(db, "peek", "Orders")
    assert code == 0 and [json.loads(x)["body"] for x in out.splitlines()] == [
        "first", "second"]
    assert run(db, "peek", "Orders", "--top", "1")[1].count("\n") == 1
    code, out, _ = run(db, "receive", "Orders")  # still there
    assert len(out.splitlines()) == 2


def test_endpoint_and_route_commands_create_list_and_drop(tmp_path: Path) -> None:
    db = tmp_path / "net.db"
    shop(db).close()
    code, out, _ = run(db, "endpoint", "create", "--port", "4599", "--secret", "hush",
                       "--encryption", "supported")
    assert code == 0 and "broker_instance" in out
    code, out, _ = run(db, "endpoint", "list")
    assert code == 0 and "4599" in out and "hush" not in out
    code, out, _ = run(db, "route", "create", "ToFar", "--service", "Far",
                       "--address", "tcp://10.0.0.2:4022")
    assert code == 0
    code, out, _ = run(db, "route", "list")
    assert "ToFar" in out and "tcp://10.0.0.2:4022" in out and "AutoCreatedLocal" in out
    code, _, err = run(db, "route", "create", "ToFar", "--service", "Far",
                       "--address", "tcp://10.0.0.3:4022")
    assert code == 1 and "different definition" in err and err.count("\n") == 1
    assert run(db, "route", "drop", "ToFar")[0] == 0
    assert "ToFar" not in run(db, "route", "list")[1]
    assert run(db, "endpoint", "drop")[0] == 0
    code, _, err = run(db, "route", "create", "Bad", "--address", "http://x")
    assert code == 1 and "tcp://host:port" in err


def test_run_takes_the_spark_master_or_remote_from_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "quiet_tasks.py").write_text("def noop(spark):\n    return 1\n")
    file = tmp_path / "p.toml"
    file.write_text(textwrap.dedent('''
        [pipeline]
        name = "p"
        [options]
        spark.master = "local[2]"
        [options.spark_conf]
        "spark.sql.shuffle.partitions" = "3"
        [[stage]]
        name = "s"
        [[stage.task]]
        python = "quiet_tasks:noop"
    '''))
    db = tmp_path / "run.db"
    code, _, _ = run(db, "run", "--spark-master", "local[1]", str(file))
    assert code == 0
    with sbroker.Broker.open(db) as b:
        [setting] = [r for r in b.view("ExecutorSettings") if r["key"] == "spark"]
    stored = json.loads(setting["value"])
    assert stored["master"] == "local[1]"
    assert stored["conf"] == {"spark.sql.shuffle.partitions": "3"}  # the file's conf kept
    code, _, err = run(db, "run", "--spark-master", "local", "--spark-remote", "sc://h:1",
                       str(file))
    assert code == 2 and "not both" in err
    code, _, err = run(db, "run", "--spark-remote", "http://h:1", str(file))
    assert code == 2 and "sc://" in err


def test_poison_lists_show_times_as_local_date_times(tmp_path: Path) -> None:
    from sbroker.apps.poison import PoisonGuard

    db = tmp_path / "p.db"
    with shop(db) as b:
        with b.transaction() as tx:
            tx.send(tx.begin_dialog("Shop", "Shop"), body="bad")

        def fail(tx: sbroker.Transaction, msg: sbroker.Message) -> None:
            raise ValueError("cannot")

        assert PoisonGuard(b, "Orders", threshold=3).process_one(fail)
    code, out, _ = run(db, "poison", "incidents")
    assert code == 0
    when = json.loads(out)["occurred_at"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", when), when
