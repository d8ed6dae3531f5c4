"""Schedules (SPEC §13): a pipeline file started every N seconds or on a cron expression, by
whichever `sbroker serve` takes the schedule's timer.

Each schedule is a row of ``PipelineSchedules`` and a dialog whose conversation timer is set
to its next due time.  The process that receives the DialogTimer creates the due runs, moves
the next due time on and sets the timer again, all in the transaction of that receive: however
many servers share the database, each due run is created once, and a timer that fell due while
no server was up fires when one starts.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import math
import zoneinfo
from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from croniter import croniter

from sbroker.apps.pipeline.loading import load_definition
from sbroker.apps.pipeline.model import Pipeline, Schedule
from sbroker.apps.pipeline.parser import PipelineError
from sbroker.apps.pipeline.runner import DurableRunner
from sbroker.apps.pipeline.runstate import RunState
from sbroker.apps.sql import dicts, read_dicts, statements
from sbroker.core.errors import BrokerError
from sbroker.engine.api import BrokerAPI
from sbroker.engine.transaction import Transaction

__all__ = ["MAX_CATCHUP", "SCHEDULE_QUEUE", "SCHEDULE_SERVICE", "add_schedule", "due_times",
           "fire", "list_schedules", "next_after", "remove_schedule"]
log = logging.getLogger("sbroker.pipeline")
SCHEDULE_QUEUE = "QueuePipelineSchedules"
SCHEDULE_SERVICE = "ServicePipelineSchedules"
MAX_CATCHUP = 100


def next_after(schedule: Schedule, t: float) -> float:
    """The first due time strictly after epoch second ``t``."""
    if schedule.every is not None:
        return t + schedule.every
    assert schedule.cron is not None
    zone = zoneinfo.ZoneInfo(schedule.timezone)
    start = dt.datetime.fromtimestamp(t, zone)
    return float(croniter(schedule.cron, start).get_next(float))


def due_times(schedule: Schedule, next_due: float, now: float) -> tuple[list[float], float]:
    """The runs due by ``now`` (every missed one, the last ``MAX_CATCHUP``, with
    ``catchup``; else only the latest) and the next due time after them."""
    if next_due > now:
        return [], next_due
    keep = MAX_CATCHUP if schedule.catchup else 1
    if schedule.every is not None:
        missed = math.floor((now - next_due) / schedule.every)
        fires = [next_due + i * schedule.every for i in range(max(0, missed - keep + 1),
                                                             missed + 1)]
        return fires, next_due + (missed + 1) * schedule.every
    due: deque[float] = deque(maxlen=keep)
    t = next_due
    while t <= now:
        due.append(t)
        t = next_after(schedule, t)
    return list(due), t


def _install(broker: BrokerAPI) -> None:
    """The schedules' queue and service, and the executor their runs need (idempotent)."""
    cat = broker.catalog
    if SCHEDULE_QUEUE not in cat.queues:
        broker.create_queue(SCHEDULE_QUEUE)
    if SCHEDULE_SERVICE not in cat.services:
        broker.create_service(SCHEDULE_SERVICE, SCHEDULE_QUEUE)
    if "ServiceAsyncTarget" not in cat.services:
        broker.install_executor()  # type: ignore[attr-defined]


def add_schedule(broker: BrokerAPI, pipeline: Pipeline, *, overrides: Mapping[str, str],
                 every: float | None = None, cron: str | None = None) -> dict[str, Any]:
    """Schedule ``pipeline`` (named by its pipeline name; an existing schedule of that name
    is replaced) by its ``[schedule]`` or by ``every`` / ``cron``; returns its row."""
    schedule = pipeline.schedule or Schedule()
    if every is not None or cron is not None:
        schedule = replace(schedule, every=every, cron=cron)
    if schedule.every is None and schedule.cron is None:
        raise PipelineError("the file has no [schedule]: give --every or --cron",
                            path=pipeline.path)
    _install(broker)
    q = statements(broker, "sbroker.apps.pipeline")
    now = broker.clock.now()
    next_due = next_after(schedule, now)
    with broker.transaction() as tx:
        old = dicts(tx.execute(q.schedule_by_name, (pipeline.name,)))
        if old and old[0]["handle"]:
            with contextlib.suppress(BrokerError):
                tx.end_conversation(old[0]["handle"])
        handle = tx.begin_dialog(SCHEDULE_SERVICE, SCHEDULE_SERVICE)
        tx.begin_conversation_timer(handle, max(0.001, next_due - now))
        tx.execute(q.upsert_schedule, (
            pipeline.name, pipeline.source or str(pipeline.path.resolve() if pipeline.path
                                                  else ""),
            json.dumps(dict(overrides)), schedule.every, schedule.cron, schedule.timezone,
            int(schedule.catchup), schedule.overlap, next_due, handle,
            dt.datetime.now(dt.UTC).isoformat()))
    [row] = [r for r in list_schedules(broker) if r["name"] == pipeline.name]
    return row


def remove_schedule(broker: BrokerAPI, name: str) -> bool:
    """Remove the schedule ``name`` (and end its dialog); False if there is none."""
    q = statements(broker, "sbroker.apps.pipeline")
    with broker.transaction() as tx:
        rows = dicts(tx.execute(q.schedule_by_name, (name,)))
        if not rows:
            return False
        if rows[0]["handle"]:
            with contextlib.suppress(BrokerError):
                tx.end_conversation(rows[0]["handle"])
        tx.execute(q.delete_schedule, (name,))
    return True


def _row(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    out["params"] = json.loads(out["params"] or "{}")
    out["catchup"] = bool(out["catchup"])
    out["next_due"] = dt.datetime.fromtimestamp(float(out["next_due"]), dt.UTC).isoformat()
    del out["handle"]
    return out


def list_schedules(broker: BrokerAPI) -> list[dict[str, Any]]:
    """Every schedule: ``name``, ``file``, ``params``, ``every`` (seconds), ``cron``,
    ``timezone``, ``catchup``, ``overlap``, ``next_due`` (ISO 8601, UTC)."""
    if SCHEDULE_QUEUE not in broker.catalog.queues:
        return []
    return [_row(r) for r in read_dicts(broker, statements(broker, "sbroker.apps.pipeline")
                                        .list_schedules)]


def fire(broker: BrokerAPI, tx: Transaction, handle: str) -> list[RunState]:
    """Inside the transaction that received the DialogTimer of dialog ``handle``: create
    the due runs (or record them skipped), move the next due time on, set the timer again.
    Returns the runs to drive once the transaction committed."""
    q = statements(broker, "sbroker.apps.pipeline")
    rows = dicts(tx.execute(q.schedule_by_handle, (handle,)))
    if not rows:  # removed meanwhile
        with contextlib.suppress(BrokerError):
            tx.end_conversation(handle)
        return []
    row = rows[0]
    name, file, params, overlap = row["name"], row["file"], row["params"], row["overlap"]
    schedule = Schedule(row["every"], row["cron"], row["timezone"], bool(row["catchup"]),
                        overlap)
    now = broker.clock.now()
    fires, following = due_times(schedule, float(row["next_due"]), now)
    tx.execute(q.set_next_due, (following, name))
    tx.begin_conversation_timer(handle, max(0.001, following - now))
    if not fires:
        return []
    try:
        pipeline = load_definition(file, json.loads(params or "{}"))
    except PipelineError as exc:
        log.error("schedule %s: cannot load its pipeline: %s", name, exc)
        return []
    runs: list[RunState] = []
    going = int(dicts(tx.execute(q.running_runs_of_schedule, (name,)))[0]["runs"])
    for _ in fires:
        if overlap == "skip" and (going or runs):
            stamp = dt.datetime.fromtimestamp(now, dt.UTC).isoformat()
            tx.execute(q.insert_skipped_run, (pipeline.name, file, params, stamp, stamp, name))
            continue
        runs.append(DurableRunner(broker, pipeline, schedule=name).create(tx))
    return runs
