"""Scheduled data (docs/pipelines.md, "Data intervals and backfills"): a schedule's ticks,
and the time each run is for.

Every run has a ``scheduled_for``: the tick of a scheduled or backfilled run, the start time
of any other (or what ``-p scheduled_for=`` gives).  Tasks read it as ``${scheduled_for}``
(ISO 8601 to the second, with the UTC offset of the schedule's timezone) and
``${scheduled_date}`` (``YYYY-MM-DD``, its date there).  The parser leaves those two
placeholders in the tasks and the runner binds them when it sends an attempt, so a task's
definition is the same for every run, and a run resumed or taken over binds its own time.

A schedule's ticks: a cron expression's are croniter's in the schedule's timezone (across a
daylight-saving change too); ``every = D``'s are the multiples of D since the Unix epoch, so
that the live schedule and a backfill reach the same ticks.  Ticks are compared in whole
milliseconds (``tick_key``).  Pure: no clock, no I/O.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import zoneinfo
from collections import deque
from collections.abc import Mapping
from typing import Any

from croniter import croniter

from sbroker.apps.pipeline.model import Schedule
from sbroker.apps.spark.tasks import PythonTask, SparkSQL, Task

__all__ = ["MAX_CATCHUP", "MAX_TICKS", "RUN_CONTEXT", "bind_task", "due_ticks", "due_times",
           "format_time", "next_after", "parse_time", "run_context", "scheduled_for_of",
           "tick_key", "ticks_between"]

RUN_CONTEXT = ("scheduled_for", "scheduled_date")
MAX_CATCHUP = 100  # missed ticks a schedule with catchup = true runs when a server is up
MAX_TICKS = 10_000  # ticks one backfill may cover
_BOUND = re.compile(r"\$(\$?)\{(scheduled_for|scheduled_date)\}")


# -- the time a run is for -------------------------------------------------------------------
def format_time(epoch: float, timezone: str) -> str:
    """``epoch`` as ISO 8601 to the second with the UTC offset of ``timezone``."""
    return dt.datetime.fromtimestamp(math.floor(epoch), zoneinfo.ZoneInfo(timezone)).isoformat()


def parse_time(text: str, timezone: str) -> float:
    """Epoch seconds of an ISO 8601 date (its midnight) or time; one without a UTC offset
    is in ``timezone``.  ``ValueError`` with a one-line message otherwise."""
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 date or time (such as 2026-01-31,"
                         " 2026-01-31T02:00 or 2026-01-31T02:00:00+01:00)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=zoneinfo.ZoneInfo(timezone))
    return when.timestamp()


def scheduled_for_of(text: str, timezone: str) -> str:
    """``-p scheduled_for=TEXT`` in its canonical form (``ValueError`` if not a time)."""
    return format_time(parse_time(text, timezone), timezone)


def run_context(scheduled_for: str) -> dict[str, str]:
    """What a run's tasks read: ``scheduled_for`` and ``scheduled_date`` (its date in the
    timezone it is written in)."""
    return {RUN_CONTEXT[0]: scheduled_for, RUN_CONTEXT[1]: scheduled_for[:10]}


def _bind_text(text: str, context: Mapping[str, str]) -> str:
    if "{scheduled_" not in text:
        return text
    return _BOUND.sub(lambda m: "${" + m.group(2) + "}" if m.group(1) else context[m.group(2)],
                      text)


def _bind(value: Any, context: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _bind_text(value, context)
    if isinstance(value, Mapping):
        return {k: _bind(v, context) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_bind(v, context) for v in value]
    return value


def bind_task(task: Task, context: Mapping[str, str]) -> Task:
    """``task`` with ``${scheduled_for}`` / ``${scheduled_date}`` in its SQL and arguments
    replaced by the run's (``$${...}`` stays as the text ``${...}``); the same object when
    it has none."""
    if isinstance(task, SparkSQL):
        sql, args = _bind_text(task.sql, context), _bind(task.args, context)
        return task if sql == task.sql and args == task.args else SparkSQL(sql, args)
    kwargs = _bind(task.kwargs, context)
    return task if kwargs == task.kwargs else PythonTask(task.target, **kwargs)


# -- a schedule's ticks ----------------------------------------------------------------------
def tick_key(epoch: float) -> int:
    """A tick as the database keys it: whole Unix milliseconds."""
    return round(epoch * 1000)


def next_after(schedule: Schedule, t: float) -> float:
    """The first tick strictly after epoch second ``t``."""
    if schedule.every is not None:
        step = max(1, round(schedule.every * 1000))
        return (tick_key(t) // step + 1) * step / 1000
    assert schedule.cron is not None
    start = dt.datetime.fromtimestamp(t, zoneinfo.ZoneInfo(schedule.timezone))
    return float(croniter(schedule.cron, start).get_next(float))


def due_ticks(schedule: Schedule, next_due: float,
              now: float) -> tuple[list[float], float, int]:
    """The ticks due by ``now`` from ``next_due`` on that run (every missed one, the last
    ``MAX_CATCHUP``, with ``catchup``; else only the latest), the next tick after them, and
    how many due ticks were dropped."""
    if next_due > now:
        return [], next_due, 0
    keep = MAX_CATCHUP if schedule.catchup else 1
    if schedule.every is not None:
        missed = math.floor((now - next_due) / schedule.every)
        first = max(0, missed - keep + 1)
        fires = [next_due + i * schedule.every for i in range(first, missed + 1)]
        return fires, next_due + (missed + 1) * schedule.every, first
    due: deque[float] = deque(maxlen=keep)
    t, count = next_due, 0
    while t <= now:
        due.append(t)
        count += 1
        t = next_after(schedule, t)
    return list(due), t, count - len(due)


def due_times(schedule: Schedule, next_due: float, now: float) -> tuple[list[float], float]:
    """The ticks due by ``now`` that run, and the next tick after them (``due_ticks``)."""
    fires, following, _ = due_ticks(schedule, next_due, now)
    return fires, following


def ticks_between(schedule: Schedule, start: float, end: float) -> list[float]:
    """The schedule's ticks in [``start``, ``end``), in order; ``ValueError`` when there are
    more than ``MAX_TICKS``."""
    out: list[float] = []
    t = next_after(schedule, start - 0.001)
    while t < end:
        if t >= start:
            out.append(t)
            if len(out) > MAX_TICKS:
                raise ValueError(f"the range holds more than {MAX_TICKS} ticks of the"
                                 " schedule: backfill it in parts")
        t = next_after(schedule, t)
    return out
