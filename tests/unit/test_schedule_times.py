"""When a schedule's runs are due (docs/pipelines.md): ``every`` and five-field ``cron`` in a
time zone, one run for what was missed, or every missed one up to 100 with ``catchup``."""

from __future__ import annotations

import datetime as dt

from sbroker.apps.pipeline.model import Schedule
from sbroker.apps.pipeline.schedules import MAX_CATCHUP, due_times, next_after

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC).timestamp()
HOUR = 3600.0


def test_every_nothing_due_before_the_time() -> None:
    assert due_times(Schedule(every=60.0), T0 + 1, T0) == ([], T0 + 1)


def test_every_missed_runs_are_one_run_without_catchup() -> None:
    fires, following = due_times(Schedule(every=HOUR), T0, T0 + 4.5 * HOUR)
    assert fires == [T0 + 4 * HOUR] and following == T0 + 5 * HOUR


def test_every_missed_runs_with_catchup_all_of_them_up_to_100() -> None:
    fires, following = due_times(Schedule(every=HOUR, catchup=True), T0, T0 + 4.5 * HOUR)
    assert fires == [T0 + i * HOUR for i in range(5)] and following == T0 + 5 * HOUR
    fires, _ = due_times(Schedule(every=60.0, catchup=True), T0, T0 + 1000 * 60.0)
    assert len(fires) == MAX_CATCHUP and fires[-1] == T0 + 1000 * 60.0


def test_cron_in_a_time_zone() -> None:
    paris = Schedule(cron="0 2 * * *", timezone="Europe/Paris")
    # 2 a.m. in Paris is 01:00 UTC in winter
    assert next_after(paris, T0) == dt.datetime(2026, 3, 2, 1, 0, tzinfo=dt.UTC).timestamp()
    utc = Schedule(cron="0 2 * * *")
    assert next_after(utc, T0) == dt.datetime(2026, 3, 2, 2, 0, tzinfo=dt.UTC).timestamp()


def test_cron_catchup_over_missed_days() -> None:
    first = next_after(Schedule(cron="0 2 * * *"), T0)
    sched = Schedule(cron="0 2 * * *", catchup=True)
    fires, following = due_times(sched, first, first + 3 * 24 * HOUR + 5)
    assert fires == [first + d * 24 * HOUR for d in range(4)]
    assert following == first + 4 * 24 * HOUR
    fires, _ = due_times(Schedule(cron="*/5 * * * *"), first, first + 24 * HOUR)
    assert fires == [first + 24 * HOUR]
