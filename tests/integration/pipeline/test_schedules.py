"""Schedules on SQLite and PostgreSQL (docs/pipelines.md): stored with their next due time,
fired by their dialog's conversation timer, each due run created once however many servers
(brokers on the same database: "hosts") take timers, catch-up and overlap="skip"."""

from __future__ import annotations

import threading
from pathlib import Path

import sbroker
from sbroker.apps.pipeline import list_runs, load_pipeline
from sbroker.apps.pipeline.runner import DurableRunner
from sbroker.apps.pipeline.runstate import RunState
from sbroker.apps.pipeline.schedules import add_schedule, list_schedules, remove_schedule
from sbroker.apps.pipeline.service import PipelineService

HOUR = 3600.0




def _file(folder: Path, schedule: str) -> Path:
    path = folder / "nightly.toml"
    path.write_text('[pipeline]\nname = "nightly"\n[params]\nn = 1\n' + schedule
                    + '[[task]]\nname = "a"\npython = "pipeline_task_helpers:add"\n'
                    'args = { a = "${n}", b = 2 }\n')
    return path


def _fall_due(broker: sbroker.Broker, hours_ago: float) -> None:
    """Move the schedule's next due time back and make its timer fire now."""
    due = broker.clock.now() - hours_ago * HOUR
    with broker.transaction() as tx:
        tx.execute(_sql(broker, "UPDATE PipelineSchedules SET NextDue = ?"), (due,))
        [(handle,)] = tx.execute("SELECT Handle FROM PipelineSchedules").fetchall()
        tx.begin_conversation_timer(handle, 0.001)


def _sql(broker: sbroker.Broker, text: str) -> str:
    return text.replace("?", "%s") if broker.dialect == "postgresql" else text


def _take(services: list[PipelineService]) -> list[list[RunState]]:
    """Both servers poll the timers at once; what each created."""
    out: list[list[RunState]] = [[] for _ in services]
    threads = [threading.Thread(target=lambda i=i: out[i].extend(services[i].poll(3.0)))
               for i in range(len(services))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_add_list_remove(hosts: list[sbroker.Broker], tmp_path: Path) -> None:
    b = hosts[0]
    pipeline = load_pipeline(_file(tmp_path, '[schedule]\ncron = "0 2 * * *"\n'), {"n": "5"})
    row = add_schedule(b, pipeline, overrides={"n": "5"})
    assert (row["name"], row["cron"], row["params"], row["overlap"]) == (
        "nightly", "0 2 * * *", {"n": "5"}, "skip")
    assert row["next_due"].endswith("T02:00:00+00:00")
    replaced = add_schedule(b, pipeline, overrides={}, every=900.0)
    assert (replaced["every"], replaced["cron"]) == (900.0, None)
    assert [r["name"] for r in list_schedules(hosts[1])] == ["nightly"]
    assert remove_schedule(b, "nightly") and not remove_schedule(b, "nightly")
    assert list_schedules(b) == []


def test_each_due_run_is_created_once_by_one_of_the_servers(
        hosts: list[sbroker.Broker], tmp_path: Path) -> None:
    path = _file(tmp_path, '[schedule]\nevery = "1h"\ncatchup = true\noverlap = "queue"\n')
    add_schedule(hosts[0], load_pipeline(path), overrides={})
    services = [PipelineService(b) for b in hosts]
    _fall_due(hosts[0], 4.5)  # due 4.5 h, 3.5 h, ... 0.5 h ago: five runs
    created = _take(services)
    assert sorted(len(c) for c in created) == [0, 5]
    assert len(list_runs(hosts[1], "nightly")) == 5
    [runs] = [c for c in created if c]
    finished = DurableRunner(hosts[0], runs[0].pipeline).drive(runs[0])
    assert finished.status == "succeeded" and finished.tasks["a"].value == 3
    [row] = list_schedules(hosts[0])
    assert row["next_due"] > list_runs(hosts[0])[0]["start_time"]  # moved past now


def test_without_catchup_missed_runs_are_one_and_skip_records_an_overlap(
        hosts: list[sbroker.Broker], tmp_path: Path) -> None:
    add_schedule(hosts[0], load_pipeline(_file(tmp_path, '[schedule]\nevery = "1h"\n')),
                 overrides={})
    services = [PipelineService(b) for b in hosts]
    _fall_due(hosts[0], 4.5)
    assert sorted(len(c) for c in _take(services)) == [0, 1]
    _fall_due(hosts[0], 0.5)  # the first run is still "running": this one is skipped
    assert sorted(len(c) for c in _take(services)) == [0, 0]
    assert [r["status"] for r in list_runs(hosts[0], "nightly")] == ["skipped", "running"]


def test_a_due_run_whose_task_module_this_server_cannot_import_is_recorded_and_fails(
        hosts: list[sbroker.Broker], tmp_path: Path) -> None:
    path = _file(tmp_path, '[schedule]\nevery = "1h"\n')
    add_schedule(hosts[0], load_pipeline(path), overrides={})
    path.write_text(path.read_text().replace("pipeline_task_helpers:add",
                                             "no_such_module_here:add"))
    _fall_due(hosts[0], 0.5)
    [[run]] = [c for c in _take([PipelineService(hosts[0])]) if c]  # the tick is not lost
    finished = DurableRunner(hosts[0], run.pipeline).drive(run)
    assert finished.status == "failed"
    assert "No module named 'no_such_module_here'" in (finished.tasks["a"].error or "")
