"""Scheduled data on SQLite and PostgreSQL (docs/pipelines.md, "Data intervals and
backfills"): the time each run is for, as its tasks read it (scheduled, backfilled, manual,
resumed, taken over); backfills with reprocess none / failed / all; max_active_runs; and a
tick that ends with one run however the live schedule and backfills race for it.  Two
brokers on one database stand for two servers ("hosts"); tasks go to StubRunners."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.helpers import started

import sbroker
from sbroker.apps.pipeline import (
    PipelineError,
    PipelineService,
    get_run,
    list_runs,
    load_pipeline,
    resume_run,
    start_run,
    wait_run,
)
from sbroker.apps.pipeline.backfill import Backfill, plan_backfill
from sbroker.apps.pipeline.intervals import format_time, next_after, parse_time, tick_key
from sbroker.apps.pipeline.model import Schedule
from sbroker.apps.pipeline.runner import DurableRunner
from sbroker.apps.pipeline.schedules import add_schedule
from sbroker.apps.pipeline.store import TickTaken
from sbroker.apps.spark import StubRunner

HOUR = 3600.0
DAY = "2026-01-10"  # the backfilled day: hours 00:00 ... in UTC


def _file(folder: Path, schedule: str, task: str = "when", name: str = "hourly") -> Path:
    args = {"when": f'{{ day = "${{scheduled_date}}", at = "${{scheduled_for}}", '
                    f'fail_days = "{folder / "fail_days.txt"}" }}',
            "pause": "{ seconds = 0.3 }"}[task]
    path = folder / f"{name}.toml"
    path.write_text(f'[pipeline]\nname = "{name}"\n[schedule]\n{schedule}\n[[task]]\n'
                    f'name = "t"\npython = "pipeline_task_helpers:{task}"\nargs = {args}\n')
    return path


def _schedule(broker: sbroker.Broker, folder: Path, schedule: str = 'every = "1h"',
              **kwargs: Any) -> Path:
    path = _file(folder, schedule, **kwargs)
    add_schedule(broker, load_pipeline(path), overrides={})
    return path


def _sql(broker: sbroker.Broker, text: str) -> str:
    return text.replace("?", "%s") if broker.dialect == "postgresql" else text


def _fall_due(broker: sbroker.Broker, due: float) -> None:
    """The schedule's next tick moved back to ``due``, and its timer made to fire now."""
    with broker.transaction() as tx:
        tx.execute(_sql(broker, "UPDATE PipelineSchedules SET NextDue = ?"), (due,))
        [(handle,)] = tx.execute("SELECT Handle FROM PipelineSchedules").fetchall()
        tx.begin_conversation_timer(handle, 0.001)


def _runs_by_tick(broker: sbroker.Broker) -> dict[int, list[tuple[int, str]]]:
    """Every run that is not a `skipped` record, by tick: [(run id, status)]."""
    with broker.transaction() as tx:
        rows = tx.execute("SELECT Tick, RunID, Status FROM PipelineRuns WHERE Tick IS NOT"
                          " NULL AND Status <> 'skipped' ORDER BY RunID").fetchall()
    out: dict[int, list[tuple[int, str]]] = {}
    for tick, run_id, status in rows:
        out.setdefault(int(tick), []).append((int(run_id), str(status)))
    return out


def _at_once(*calls: Callable[[], Any]) -> list[Any]:
    """Run ``calls`` on threads released together; their results."""
    barrier = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        out[i] = calls[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def _values(broker: sbroker.Broker, run_id: int) -> Any:
    run = get_run(broker, run_id)
    assert run is not None
    return run["tasks"][0]["value"]


# -- the time a run is for --------------------------------------------------------------------
def test_each_kind_of_run_reads_the_time_it_is_for(hosts: list[sbroker.Broker],
                                                   tmp_path: Path) -> None:
    b = hosts[0]
    path = _schedule(b, tmp_path, 'cron = "0 2 * * *"\ntimezone = "Europe/Paris"',
                     name="nightly")
    manual = start_run(b, load_pipeline(path))
    start = get_run(b, manual.run_id)
    assert start is not None and manual.scheduled_for == start["scheduled_for"]
    assert start["scheduled_for"].endswith(("+01:00", "+02:00"))  # the schedule's zone
    assert _values(b, manual.run_id) == {"day": manual.scheduled_for[:10],
                                         "at": manual.scheduled_for}
    given = start_run(b, load_pipeline(path, {"scheduled_for": "2026-01-15T06:00"}))
    assert _values(b, given.run_id) == {"day": "2026-01-15", "at": "2026-01-15T06:00:00+01:00"}

    _fall_due(b, parse_time("2026-01-20T02:00", "Europe/Paris"))  # no catch-up: the latest
    [scheduled] = PipelineService(b).poll(3.0)
    DurableRunner(b, scheduled.pipeline).drive(scheduled)
    latest = format_time(next_after(Schedule(cron="0 2 * * *", timezone="Europe/Paris"),
                                    b.clock.now() - 86400), "Europe/Paris")
    assert _values(b, scheduled.run_id) == {"day": latest[:10], "at": latest}

    results = plan_backfill(b, "nightly", "2026-01-04", "2026-01-06").run()
    assert [(r.scheduled_for, r.status) for r in results] == [
        ("2026-01-04T02:00:00+01:00", "succeeded"), ("2026-01-05T02:00:00+01:00", "succeeded")]
    assert _values(b, results[1].run_id) == {"day": "2026-01-05",
                                             "at": "2026-01-05T02:00:00+01:00"}
    by_id = {r["run_id"]: r["scheduled_for"] for r in list_runs(b)}
    assert by_id[results[0].run_id] == "2026-01-04T02:00:00+01:00"


def test_a_run_resumed_or_taken_over_keeps_its_time(hosts: list[sbroker.Broker],
                                                    tmp_path: Path) -> None:
    b = hosts[0]
    path = _schedule(b, tmp_path)
    (tmp_path / "fail_days.txt").write_text(DAY)
    [failed] = plan_backfill(b, "hourly", f"{DAY}T05:00", f"{DAY}T06:00").run()
    assert failed.status == "failed"
    (tmp_path / "fail_days.txt").write_text("")
    later = load_pipeline(path)  # loaded now: its own runs would be for now
    with pytest.raises(PipelineError, match="keeps the time it is for"):
        resume_run(b, load_pipeline(path, {"scheduled_for": "2026-02-01"}), failed.run_id)
    resumed = resume_run(b, later, failed.run_id)
    assert resumed.status == "succeeded" and resumed.scheduled_for == f"{DAY}T05:00:00+00:00"
    assert _values(b, failed.run_id) == {"day": DAY, "at": f"{DAY}T05:00:00+00:00"}

    [submitted] = plan_backfill(b, "hourly", f"{DAY}T07:00", f"{DAY}T08:00").submit()
    assert submitted.status == "submitted" and submitted.run_id is not None
    server = PipelineService(hosts[1])
    try:
        assert server.take_over() == [submitted.run_id]
        assert wait_run(b, submitted.run_id, 30) == "succeeded"
    finally:
        server.stop()
    assert _values(b, submitted.run_id) == {"day": DAY, "at": f"{DAY}T07:00:00+00:00"}


# -- backfills ----------------------------------------------------------------------------------
def test_reprocess_none_failed_and_all(hosts: list[sbroker.Broker], tmp_path: Path) -> None:
    b = hosts[0]
    _schedule(b, tmp_path)
    fails = tmp_path / "fail_days.txt"
    fails.write_text(DAY)

    def backfill(reprocess: str, start: str = "T00:00") -> list[tuple[int | None, str]]:
        plan = plan_backfill(b, "hourly", DAY + start, f"{DAY}T03:00", reprocess=reprocess)
        return [(r.run_id, r.status) for r in plan.run()]

    first = backfill("none")
    assert [s for _, s in first] == ["failed"] * 3
    ids = [i for i, _ in first]
    fails.write_text("")
    assert backfill("none") == [(i, "skipped") for i in ids]  # every tick has a run
    assert backfill("failed", "T01:00") == [(ids[1], "succeeded"), (ids[2], "succeeded")]
    assert backfill("failed") == [(ids[0], "succeeded"), (ids[1], "skipped"),
                                  (ids[2], "skipped")]
    assert backfill("all") == [(i, "succeeded") for i in ids]  # again, in place
    attempts = [get_run(b, i)["tasks"][0]["attempts"] for i in ids]  # type: ignore[index]
    assert attempts == [3, 3, 3]
    assert {t: [s for _, s in runs] for t, runs in _runs_by_tick(b).items()} == {
        tick_key(parse_time(f"{DAY}T0{h}:00", "UTC")): ["succeeded"] for h in range(3)}


def test_max_active_runs_bounds_the_runs_of_a_schedule(database: str, tmp_path: Path) -> None:
    stub = StubRunner()  # one executor: its peak of tasks at once is the runs' peak
    with started(database, stub) as b:
        for most in (1, 2):
            folder = tmp_path / str(most)
            folder.mkdir()
            _schedule(b, folder, f'every = "1h"\nmax_active_runs = {most}', task="pause",
                      name=f"most{most}")
            stub.max_running = 0
            results = plan_backfill(b, f"most{most}", DAY, f"{DAY}T03:00", parallel=3).run()
            assert [r.status for r in results] == ["succeeded"] * 3
            assert stub.max_running == most


def test_the_live_schedule_starts_max_active_runs_and_skips_the_rest(
        hosts: list[sbroker.Broker], tmp_path: Path) -> None:
    b = hosts[0]
    _schedule(b, tmp_path, 'every = "1h"\ncatchup = true\nmax_active_runs = 2')
    now = b.clock.now()
    _fall_due(b, (now // HOUR - 2) * HOUR)  # three ticks due
    created = PipelineService(b).poll(3.0)
    assert len(created) == 2
    with b.transaction() as tx:
        [(error,)] = tx.execute("SELECT Error FROM PipelineRuns WHERE Status = 'skipped'")\
            .fetchall()
    assert "max_active_runs" in error


# -- one run per tick, whatever races for it ---------------------------------------------------
def test_a_tick_has_one_run_in_the_database_itself(hosts: list[sbroker.Broker],
                                                   tmp_path: Path) -> None:
    path = _schedule(hosts[0], tmp_path)
    tick = parse_time(f"{DAY}T04:00", "UTC")
    DurableRunner(hosts[0], load_pipeline(path), schedule="hourly").create(tick=tick)
    with pytest.raises(TickTaken):  # no lock taken: the key on (schedule, tick) refuses it
        DurableRunner(hosts[1], load_pipeline(path), schedule="hourly").create(tick=tick)


def test_the_live_schedule_and_a_backfill_reaching_a_tick_run_it_once(
        hosts: list[sbroker.Broker], tmp_path: Path) -> None:
    _schedule(hosts[0], tmp_path, 'every = "1h"\ncatchup = true\nmax_active_runs = 100')
    service = PipelineService(hosts[0])
    last = (hosts[0].clock.now() // HOUR) * HOUR  # the latest tick

    def plan(tick: float) -> Backfill:
        return plan_backfill(hosts[1], "hourly", format_time(tick, "UTC"),
                             format_time(tick + 1, "UTC"))

    # one after the other: the second to come leaves the tick to the first
    claimed = plan(last).claim(last)
    assert isinstance(claimed, tuple)
    _fall_due(hosts[0], last)
    assert service.poll(3.0) == []
    with hosts[0].transaction() as tx:
        [(error,)] = tx.execute("SELECT Error FROM PipelineRuns WHERE Status = 'skipped'")\
            .fetchall()
    assert error == f"the tick has run {claimed[1].run_id} already"
    _fall_due(hosts[0], last - HOUR)  # catch-up: the hour before runs, the last is skipped
    [hour_before] = service.poll(3.0)
    late = plan(last - HOUR).claim(last - HOUR)
    assert not isinstance(late, tuple)
    assert late.note == f"skipped: its run {hour_before.run_id} is running"
    for round_ in range(2, 6):  # at once
        tick = last - round_ * HOUR
        _fall_due(hosts[0], tick)
        backfill = plan(tick)
        fired, claimed = _at_once(lambda: service.poll(3.0),
                                  lambda backfill=backfill, tick=tick: backfill.claim(tick))
        runs = _runs_by_tick(hosts[0])[tick_key(tick)]
        assert len(runs) == 1, (round_, runs)
        fired_it = any(r.scheduled_for == format_time(tick, "UTC") for r in fired)
        assert fired_it != isinstance(claimed, tuple)  # one of the two has the tick
    assert all(len(runs) == 1 for runs in _runs_by_tick(hosts[0]).values())


@pytest.mark.parametrize("reprocess", ["none", "all"])
def test_two_overlapping_backfills_run_each_tick_once(hosts: list[sbroker.Broker],
                                                      tmp_path: Path, reprocess: str) -> None:
    _schedule(hosts[0], tmp_path, 'every = "1h"\nmax_active_runs = 4')
    if reprocess == "all":  # every tick has a run already: both run it again, in place
        plan_backfill(hosts[0], "hourly", DAY, f"{DAY}T09:00", parallel=4).run()
    plans = [plan_backfill(hosts[0], "hourly", DAY, f"{DAY}T06:00", reprocess=reprocess,
                           parallel=2),
             plan_backfill(hosts[1], "hourly", f"{DAY}T03:00", f"{DAY}T09:00",
                           reprocess=reprocess, parallel=2)]
    results = _at_once(plans[0].run, plans[1].run)
    runs = _runs_by_tick(hosts[0])
    assert sorted(runs) == [tick_key(parse_time(f"{DAY}T0{h}:00", "UTC")) for h in range(9)]
    assert all(statuses == [(statuses[0][0], "succeeded")] for statuses in runs.values())
    both = [r for plan in results for r in plan if 3 <= (r.tick % 86400) / HOUR < 6]
    assert all(r.status in ("succeeded", "skipped") for plan in results for r in plan)
    assert len(both) == 6
