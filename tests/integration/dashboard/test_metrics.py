"""/metrics: the names and labels of docs/dashboard.md, read from the database at each scrape,
so the counters never go down, survive restarts and agree across processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

import sbroker
from sbroker.apps.dashboard import create_app
from sbroker.apps.dashboard.demo import poison_queue
from sbroker.apps.spark import StubRunner

from .helpers import send

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(client: TestClient) -> Samples:
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(r.text) for s in family.samples}


def metric(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_every_documented_metric_with_its_labels(pair: sbroker.Broker,
                                                client: TestClient) -> None:
    pair.install_executor(runner=StubRunner())
    pair.create_route("Far", service_name="FarService", address="tcp://127.0.0.1:9")
    with pair.transaction() as tx:
        tx.send(tx.begin_dialog("InitService", "FarService"), body="away")
    send(pair, 3)
    tx = pair.transaction()
    tx.receive("TargetQueue", top=1)
    try:
        send(pair, 2)
        samples = scrape(client)
    finally:
        tx.rollback()
    assert metric(samples, "sbroker_queue_messages", queue="TargetQueue", state="ready") == 2
    assert metric(samples, "sbroker_queue_messages", queue="TargetQueue", state="locked") == 3
    assert metric(samples, "sbroker_queue_oldest_message_age_seconds", queue="TargetQueue") >= 0
    assert metric(samples, "sbroker_queue_readers", queue="QueueAsyncTarget") == 0
    assert metric(samples, "sbroker_queue_enabled", queue="TargetQueue") == 1
    assert metric(samples, "sbroker_transmission_queue_messages", to_service="FarService") == 1
    assert metric(samples, "sbroker_conversations", state="CO") == 5  # 3 initiators, 2 targets
    assert metric(samples, "sbroker_scheduler_tasks", status="queued") == 0
    assert metric(samples, "sbroker_messages_enqueued_total", queue="TargetQueue") == 5
    assert metric(samples, "sbroker_messages_received_total", queue="TargetQueue") == 0


def test_oldest_message_age_follows_the_brokers_clock(tmp_path: Path) -> None:
    clock = sbroker.FakeClock(1_800_000_000.0)
    with sbroker.Broker.open(tmp_path / "age.db", clock=clock) as b:
        b.create_queue("Q")
        b.create_service("S", "Q", ["DEFAULT"])
        with b.transaction() as tx:
            tx.send(tx.begin_dialog("S", "S"), body="x")
        clock.advance(42.5)
        with TestClient(create_app(b)) as client:
            samples = scrape(client)
            assert metric(samples, "sbroker_queue_oldest_message_age_seconds", queue="Q") == 42.5
            assert "42.5 s" in client.get("/").text


def test_a_queue_disabled_by_poison_reports_enabled_zero(pair: sbroker.Broker,
                                                         client: TestClient) -> None:
    poison_queue(pair)
    assert metric(scrape(client), "sbroker_queue_enabled", queue="Payments") == 0


RECEIVER = """
import sys, sbroker
with sbroker.Broker.open(sys.argv[1]) as b:
    for _ in range(int(sys.argv[2])):
        with b.transaction() as tx:
            tx.receive("TargetQueue", top=1)
"""


def test_counters_agree_across_processes_and_survive_a_restart(db_path: Path) -> None:
    broker = sbroker.Broker.open(db_path)
    broker.create_queue("InitQueue")
    broker.create_queue("TargetQueue")
    broker.create_service("InitService", "InitQueue")
    broker.create_service("TargetService", "TargetQueue", ["DEFAULT"])
    for _ in range(5):
        send(broker, 2)
    subprocess.run([sys.executable, "-c", RECEIVER, str(db_path), "3"], check=True, timeout=60)
    with TestClient(create_app(broker)) as client:
        here = scrape(client)
    with sbroker.Broker.open(db_path) as other, TestClient(create_app(other)) as client:
        there = scrape(client)
    broker.close()
    with sbroker.Broker.open(db_path) as reopened, TestClient(create_app(reopened)) as client:
        after_restart = scrape(client)
    for samples in (here, there, after_restart):
        assert metric(samples, "sbroker_messages_enqueued_total", queue="TargetQueue") == 10
        received = metric(samples, "sbroker_messages_received_total", queue="TargetQueue")
        assert received == 3  # three receives of one message, in another process
        assert metric(samples, "sbroker_queue_messages", queue="TargetQueue", state="ready") == 7


def test_counters_never_go_down_as_messages_are_received(pair: sbroker.Broker,
                                                         client: TestClient) -> None:
    send(pair, 4)
    seen = []
    for _ in range(3):
        with pair.transaction() as tx:
            tx.receive("TargetQueue", top=1)
        samples = scrape(client)
        seen.append((metric(samples, "sbroker_messages_enqueued_total", queue="TargetQueue"),
                     metric(samples, "sbroker_messages_received_total", queue="TargetQueue")))
    assert seen == [(4, 1), (4, 2), (4, 3)]


SCHEDULED = """
import sys, sbroker
from sbroker.apps.pipeline.backfill import plan_backfill
with sbroker.Broker.open(sys.argv[1]) as b:
    plan_backfill(b, "hourly", "2026-01-10T00:00", "2026-01-10T02:00").submit()
"""


def test_schedule_runs_are_counted_by_outcome_in_the_database(db_path: Path,
                                                              tmp_path: Path) -> None:
    from sbroker.apps.pipeline import PipelineService, load_pipeline
    from sbroker.apps.pipeline.schedules import add_schedule

    path = tmp_path / "hourly.toml"
    path.write_text('[pipeline]\nname = "hourly"\n[schedule]\nevery = "1h"\n[[task]]\n'
                    'name = "a"\npython = "m:f"\n')
    hour = 3600.0
    with sbroker.Broker.open(db_path) as b:
        b.start()  # its timers fire
        add_schedule(b, load_pipeline(path), overrides={})
        service = PipelineService(b)
        for due in (b.clock.now() // hour - 4, b.clock.now() // hour):
            with b.transaction() as tx:  # fell due while no server was up
                tx.execute("UPDATE PipelineSchedules SET NextDue = ?", (due * hour,))
                [(handle,)] = tx.execute("SELECT Handle FROM PipelineSchedules").fetchall()
                tx.begin_conversation_timer(handle, 0.001)
            service.poll(3.0)  # 5 ticks due, 4 dropped; then the last again: it has its run
    # two ticks backfilled by another process
    subprocess.run([sys.executable, "-c", SCHEDULED, str(db_path)], check=True, timeout=60)
    for _ in range(2):  # and the same from a dashboard opened after a restart
        with sbroker.Broker.open(db_path) as b, TestClient(create_app(b)) as client:
            samples = scrape(client)
        assert {outcome: metric(samples, "sbroker_schedule_runs_total", schedule="hourly",
                                outcome=outcome)
                for outcome in ("started", "skipped", "missed")} == {
            "started": 3, "skipped": 1, "missed": 4}
