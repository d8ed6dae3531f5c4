"""Schedules (docs/pipelines.md): a pipeline file started at each tick of ``every = D`` or a
cron expression, by whichever `sbroker serve` takes the schedule's timer, and its past ticks
run again by backfills (backfill.py).

Each schedule is a row of ``PipelineSchedules`` and a dialog whose conversation timer is set
to its next tick.  The process that receives the DialogTimer creates the due runs, moves
the next due time on and sets the timer again, all in the transaction of that receive: however
many servers share the database, each due run is created once, and a timer that fell due while
no server was up fires when one starts.

A tick has one run (``claim``): the live schedule and backfills claim ticks in transactions
that take the schedule's row first, and the key on (schedule, tick) of ``PipelineRuns``
refuses a second run of a tick whatever happens.  At most ``max_active_runs`` runs of a
schedule go at once (``wait_turn``); a tick that finds them going is recorded ``skipped``
(``overlap = "skip"``) or waits its turn (``"queue"``, and every backfilled run).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sbroker.apps.pipeline.intervals import (
    MAX_CATCHUP,
    due_ticks,
    due_times,
    format_time,
    next_after,
    tick_key,
)
from sbroker.apps.pipeline.loading import load_definition
from sbroker.apps.pipeline.model import Pipeline, Schedule
from sbroker.apps.pipeline.parser import PipelineError
from sbroker.apps.pipeline.runner import DurableRunner
from sbroker.apps.pipeline.runstate import RunState
from sbroker.apps.sql import dicts, read_dicts, statements
from sbroker.core.errors import BrokerError
from sbroker.engine.api import BrokerAPI
from sbroker.engine.transaction import Transaction

__all__ = ["MAX_CATCHUP", "SCHEDULE_QUEUE", "SCHEDULE_SERVICE", "add_schedule", "count",
           "due_times", "fire", "get_schedule", "list_schedules", "next_after",
           "remove_schedule", "schedule_of", "wait_turn"]
log = logging.getLogger("sbroker.pipeline")
SCHEDULE_QUEUE = "QueuePipelineSchedules"
SCHEDULE_SERVICE = "ServicePipelineSchedules"
TURN_POLL_SECONDS = 0.5  # how often a run waiting its turn looks again


def schedule_of(row: Mapping[str, Any]) -> Schedule:
    """The ``Schedule`` of a ``PipelineSchedules`` row."""
    return Schedule(row["every"], row["cron"], row["timezone"], bool(row["catchup"]),
                    row["overlap"], int(row["max_active_runs"]))


def count(broker: BrokerAPI, tx: Transaction, schedule: str, outcome: str, n: int = 1) -> None:
    """Inside ``tx``: ``sbroker_schedule_runs_total{schedule, outcome}`` goes up by ``n``."""
    if n:
        tx.execute(statements(broker, "sbroker.apps.pipeline").count_schedule_runs,
                   (schedule, outcome, n))


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
            int(schedule.catchup), schedule.overlap, schedule.max_active_runs, next_due, handle,
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


def get_schedule(broker: BrokerAPI, name: str) -> dict[str, Any] | None:
    """The row of schedule ``name`` (``params`` as JSON text), or None."""
    if SCHEDULE_QUEUE not in broker.catalog.queues:
        return None
    rows = read_dicts(broker, statements(broker, "sbroker.apps.pipeline").schedule_by_name,
                      (name,))
    return rows[0] if rows else None


def list_schedules(broker: BrokerAPI) -> list[dict[str, Any]]:
    """Every schedule: ``name``, ``file``, ``params``, ``every`` (seconds), ``cron``,
    ``timezone``, ``catchup``, ``overlap``, ``max_active_runs``, ``next_due`` (ISO 8601,
    UTC)."""
    if SCHEDULE_QUEUE not in broker.catalog.queues:
        return []
    return [_row(r) for r in read_dicts(broker, statements(broker, "sbroker.apps.pipeline")
                                        .list_schedules)]


def fire(broker: BrokerAPI, tx: Transaction, handle: str) -> list[RunState]:
    """Inside the transaction that received the DialogTimer of dialog ``handle``: create
    the due runs (or record them skipped, and count the ticks dropped), move the next due
    time on, set the timer again.  Returns the runs to drive once the transaction
    committed."""
    q = statements(broker, "sbroker.apps.pipeline")
    rows = dicts(tx.execute(q.schedule_by_handle, (handle,)))
    if not rows:  # removed meanwhile
        with contextlib.suppress(BrokerError):
            tx.end_conversation(handle)
        return []
    row = rows[0]
    name, schedule = row["name"], schedule_of(row)
    now = broker.clock.now()
    fires, following, missed = due_ticks(schedule, float(row["next_due"]), now)
    tx.execute(q.set_next_due, (following, name))  # first write: the schedule's row is ours
    tx.begin_conversation_timer(handle, max(0.001, following - now))
    count(broker, tx, name, "missed", missed)
    if not fires:
        return []
    try:
        pipeline = load_definition(row["file"], json.loads(row["params"] or "{}"),
                                   strict=False)
    except PipelineError as exc:
        log.error("schedule %s: cannot load its pipeline: %s", name, exc)
        return []
    runs: list[RunState] = []
    going = int(dicts(tx.execute(q.running_runs_of_schedule, (name,)))[0]["runs"])
    for tick in fires:
        taken = dicts(tx.execute(q.tick_run, (name, tick_key(tick))))
        if taken:
            why = f"the tick has run {taken[0]['run_id']} already"
        elif schedule.overlap == "skip" and going + len(runs) >= schedule.max_active_runs:
            why = (f"{schedule.max_active_runs} run(s) of the schedule were still going"
                   " (max_active_runs)")
        else:
            runs.append(DurableRunner(broker, pipeline, schedule=name).create(
                tx, tick=tick, timezone=schedule.timezone))
            continue
        stamp = dt.datetime.fromtimestamp(now, dt.UTC).isoformat()
        tx.execute(q.insert_skipped_run, (pipeline.name, row["file"], row["params"], stamp,
                                          stamp, name, format_time(tick, schedule.timezone),
                                          tick_key(tick), why))
        count(broker, tx, name, "skipped")
    count(broker, tx, name, "started", len(runs))
    return runs


def wait_turn(runner: DurableRunner, state: RunState, stop: threading.Event) -> bool:
    """A run of a schedule waits, keeping its lease, while its schedule's
    ``max_active_runs`` runs are running ahead of it (``overlap = "queue"``, backfills);
    False when ``stop`` is set meanwhile (the run is handed back for another driver)."""
    if state.schedule is None:
        return True
    while not state.cancel_requested and runner.store.must_wait(state.run_id):
        if stop.wait(TURN_POLL_SECONDS):
            runner.hand_back(state)
            return False
        runner.renew(state)
    return True
