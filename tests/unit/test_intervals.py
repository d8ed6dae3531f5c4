"""The time a run is for, and a schedule's ticks (docs/pipelines.md, "Data intervals and
backfills"): ISO 8601 to the second in the schedule's timezone, the placeholders a run's
tasks read, ticks in a range, and croniter's ticks across daylight-saving changes."""

from __future__ import annotations

import datetime as dt

import pytest

from sbroker.apps.pipeline import parse_pipeline
from sbroker.apps.pipeline.intervals import (
    MAX_TICKS,
    bind_task,
    due_times,
    format_time,
    next_after,
    parse_time,
    run_context,
    ticks_between,
)
from sbroker.apps.pipeline.model import Schedule
from sbroker.apps.pipeline.parser import PipelineError
from sbroker.apps.spark.tasks import PythonTask, SparkSQL

PARIS = "Europe/Paris"
DAY = 86400.0


def _utc(*args: int) -> float:
    return dt.datetime(*args, tzinfo=dt.UTC).timestamp()


def _local(ticks: list[float], zone: str = PARIS) -> list[str]:
    return [format_time(t, zone) for t in ticks]


def test_scheduled_for_is_iso_to_the_second_with_the_zones_offset() -> None:
    t = _utc(2026, 1, 15, 1, 0) + 0.75
    assert format_time(t, PARIS) == "2026-01-15T02:00:00+01:00"
    assert format_time(t, "UTC") == "2026-01-15T01:00:00+00:00"
    assert run_context("2026-01-15T00:30:00+01:00") == {
        "scheduled_for": "2026-01-15T00:30:00+01:00", "scheduled_date": "2026-01-15"}


def test_times_are_dates_or_times_in_the_zone_unless_they_carry_an_offset() -> None:
    assert parse_time("2026-01-15", PARIS) == _utc(2026, 1, 14, 23, 0)
    assert parse_time("2026-07-15T02:00", PARIS) == _utc(2026, 7, 15, 0, 0)
    assert parse_time("2026-07-15T02:00:00+00:00", PARIS) == _utc(2026, 7, 15, 2, 0)
    for bad in ("yesterday", "2026-13-01", "15/01/2026", ""):
        with pytest.raises(ValueError, match="is not an ISO 8601 date or time"):
            parse_time(bad, PARIS)


def test_a_task_reads_the_runs_time_in_its_sql_and_arguments() -> None:
    context = run_context("2026-01-15T02:00:00+01:00")
    sql = SparkSQL("SELECT * FROM t WHERE day = '${scheduled_date}' -- $${scheduled_for}",
                   {"at": "${scheduled_for}", "n": 3})
    bound = bind_task(sql, context)
    assert bound == SparkSQL("SELECT * FROM t WHERE day = '2026-01-15' -- ${scheduled_for}",
                             {"at": "2026-01-15T02:00:00+01:00", "n": 3})
    python = PythonTask("m:f", days=["${scheduled_date}", "x"], opts={"at": "${scheduled_for}"})
    assert bind_task(python, context) == PythonTask(
        "m:f", days=["2026-01-15", "x"], opts={"at": "2026-01-15T02:00:00+01:00"})
    plain = PythonTask("m:f", n=1)
    assert bind_task(plain, context) is plain


PIPELINE = """
[pipeline]
name = "daily"
[params]
table = "sales"
[schedule]
cron = "0 2 * * *"
timezone = "Europe/Paris"
max_active_runs = 3
[[task]]
name = "load"
sql = "SELECT * FROM ${table} WHERE day = '${scheduled_date}'"
args = { at = "${scheduled_for}" }
"""


def test_the_file_keeps_the_placeholders_for_the_runner_and_takes_p_scheduled_for() -> None:
    pipeline = parse_pipeline(PIPELINE, params={"scheduled_for": "2026-01-15"})
    [task] = pipeline.dag
    assert task.task == SparkSQL("SELECT * FROM sales WHERE day = '${scheduled_date}'",
                                 {"at": "${scheduled_for}"})
    assert pipeline.scheduled_for == "2026-01-15T00:00:00+01:00"  # the schedule's zone
    assert pipeline.schedule is not None and pipeline.schedule.max_active_runs == 3
    assert parse_pipeline(PIPELINE).scheduled_for is None


@pytest.mark.parametrize(("text", "params", "message"), [
    (PIPELINE, {"scheduled_for": "soon"}, "-p scheduled_for: 'soon' is not an ISO 8601"),
    (PIPELINE, {"scheduled_date": "2026-01-15"}, "give -p scheduled_for=DATE_OR_TIME"),
    (PIPELINE.replace('table = "sales"', 'scheduled_for = "x"'), {},
     "parameter 'scheduled_for' is the time the run is for"),
    (PIPELINE.replace("max_active_runs = 3", "max_active_runs = 0"), {},
     "'max_active_runs' must be an integer >= 1"),
])
def test_bad_times_and_limits_are_one_line(text: str, params: dict[str, str],
                                           message: str) -> None:
    with pytest.raises(PipelineError, match=message) as caught:
        parse_pipeline(text, params=params)
    assert "\n" not in str(caught.value)


def test_every_ticks_are_multiples_of_the_duration_so_backfills_meet_the_schedule() -> None:
    hourly = Schedule(every=3600.0)
    start = _utc(2026, 1, 1, 0, 30)
    assert next_after(hourly, start) == _utc(2026, 1, 1, 1, 0)
    assert next_after(hourly, _utc(2026, 1, 1, 1, 0)) == _utc(2026, 1, 1, 2, 0)
    assert ticks_between(hourly, _utc(2026, 1, 1, 1, 0), _utc(2026, 1, 1, 4, 0)) == [
        _utc(2026, 1, 1, h, 0) for h in (1, 2, 3)]  # [from, to)
    assert ticks_between(hourly, start, start + 1200) == []
    with pytest.raises(ValueError, match=f"more than {MAX_TICKS} ticks"):
        ticks_between(Schedule(every=1.0), 0.0, 2.0 * MAX_TICKS)


def test_cron_ticks_across_the_spring_change_are_croniters() -> None:
    # Paris, 29 March 2026: 02:00 becomes 03:00; 02:30 that day does not exist
    nightly = Schedule(cron="30 2 * * *", timezone=PARIS)
    ticks = ticks_between(nightly, parse_time("2026-03-28", PARIS),
                          parse_time("2026-03-31", PARIS))
    assert _local(ticks) == ["2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00",
                             "2026-03-30T02:30:00+02:00"]
    hourly = Schedule(cron="0 * * * *", timezone=PARIS)
    ticks = ticks_between(hourly, parse_time("2026-03-29T01:00", PARIS),
                          parse_time("2026-03-29T05:00", PARIS))
    assert _local(ticks) == ["2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00",
                             "2026-03-29T04:00:00+02:00"]


def test_cron_ticks_across_the_autumn_change_are_croniters() -> None:
    # Paris, 25 October 2026: 03:00 becomes 02:00; 02:30 comes twice
    nightly = Schedule(cron="30 2 * * *", timezone=PARIS)
    ticks = ticks_between(nightly, parse_time("2026-10-24", PARIS),
                          parse_time("2026-10-27", PARIS))
    expected = ["2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00",
                "2026-10-25T02:30:00+01:00", "2026-10-26T02:30:00+01:00"]
    assert _local(ticks) == expected
    # the live schedule reaches the same ticks (catch-up after a day and a half down)
    caught_up = Schedule(cron="30 2 * * *", timezone=PARIS, catchup=True)
    fires, following = due_times(caught_up, ticks[0], ticks[-1] + 60)
    assert fires == ticks and _local([following]) == ["2026-10-27T02:30:00+01:00"]
