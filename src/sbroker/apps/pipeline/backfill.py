"""Backfills (docs/pipelines.md, "Data intervals and backfills"): one run for each tick of a
schedule in [T1, T2), in tick order, at most N at once, each through the one durable runner.

A tick is claimed once (schedules.py): a tick with no run gets a new run, for that tick; a
tick that has one is left alone (``reprocess = "none"``), or its run is run again in place
(``"failed"``: when it failed or was cancelled, as ``--resume`` would, its succeeded tasks
kept; ``"all"``: every task again, whatever it ended), so that a tick never ends with two
succeeded runs.  A tick whose run is running, or that a live driver holds, is left to it.
Every run of the backfill is a run of the schedule: ``max_active_runs`` bounds them with the
schedule's own runs (each waits its turn), and they count as ``started`` in
``sbroker_schedule_runs_total``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sbroker.apps.pipeline.control import cancel_run, wait_run
from sbroker.apps.pipeline.intervals import format_time, parse_time, tick_key, ticks_between
from sbroker.apps.pipeline.leases import LeaseHeld
from sbroker.apps.pipeline.loading import load_definition
from sbroker.apps.pipeline.model import Pipeline, RunStatus, Schedule
from sbroker.apps.pipeline.parser import PipelineError
from sbroker.apps.pipeline.runner import DurableRunner
from sbroker.apps.pipeline.runstate import RunState
from sbroker.apps.pipeline.schedules import count, get_schedule, schedule_of, wait_turn
from sbroker.apps.sql import dicts, statements
from sbroker.core.errors import BrokerError
from sbroker.engine.api import BrokerAPI

__all__ = ["REPROCESS", "Backfill", "Claimed", "TickResult", "plan_backfill"]
log = logging.getLogger("sbroker.pipeline")
REPROCESS = ("none", "failed", "all")
JOIN_SECONDS = 0.2  # the main thread's wait between looks (Ctrl-C is heard meanwhile)


@dataclass(frozen=True)
class TickResult:
    """What became of one tick: its run (``None`` when skipped before one was taken) and
    that run's status (``skipped``: not run by this backfill, ``note`` says why;
    ``submitted``: left for the servers)."""

    tick: float
    scheduled_for: str
    run_id: int | None
    status: str
    note: str = ""

    @property
    def ran(self) -> bool:
        """This backfill ran the tick (its run started or started again)."""
        return self.status not in ("skipped", "submitted")


Claimed = tuple[DurableRunner, RunState] | TickResult  # a tick's run to drive, or why not


@dataclass
class Backfill:
    """A backfill of schedule ``name`` planned by ``plan_backfill``: its ``ticks`` (epoch
    seconds, in order) and how to run them."""

    broker: BrokerAPI
    name: str
    schedule: Schedule
    pipeline: Pipeline
    ticks: list[float]
    reprocess: str = "none"
    parallel: int = 1
    on_start: Callable[[TickResult], None] | None = None
    on_end: Callable[[TickResult], None] | None = None
    _active: set[int] = field(default_factory=set)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _claiming: threading.Lock = field(default_factory=threading.Lock)

    def when(self, tick: float) -> str:
        """The ``scheduled_for`` of ``tick``."""
        return format_time(tick, self.schedule.timezone)

    # -- claiming a tick -----------------------------------------------------------------------
    def _skip_reason(self, run_id: int, status: str) -> str | None:
        """Why a tick whose run is ``run_id`` (with ``status``) is not run again, or None."""
        if status == RunStatus.RUNNING:
            return f"its run {run_id} is running"
        if self.reprocess == "none":
            return f"it has run {run_id} ({status})"
        if self.reprocess == "failed" and status not in (RunStatus.FAILED, RunStatus.CANCELLED):
            return f"its run {run_id} {status}"
        return None

    def claim(self, tick: float, *, driven: bool = True) -> Claimed:
        """Take ``tick``: a new run of it, or its run started again (its lease held here
        when ``driven``, else left for the servers), or why not."""
        runner = DurableRunner(self.broker, self.pipeline, schedule=self.name)
        q = statements(self.broker, "sbroker.apps.pipeline")
        with self.broker.transaction() as tx:
            tx.execute(q.lock_schedule, (self.name,))
            rows = dicts(tx.execute(q.tick_run, (self.name, tick_key(tick))))
            if not rows:
                state = runner.create(tx, driven=driven, tick=tick,
                                      timezone=self.schedule.timezone)
                count(self.broker, tx, self.name, "started")
                return runner, state
        run_id, status = int(rows[0]["run_id"]), str(rows[0]["status"])
        why = self._skip_reason(run_id, status)
        if why is None:
            try:
                state = runner.resume(run_id, rerun_all=self.reprocess == "all")
            except LeaseHeld:
                why = f"its run {run_id} is being driven by another process"
            except PipelineError as exc:
                why = f"its run {run_id} cannot be run again: {exc}"
            else:
                if state.status == RunStatus.RUNNING:
                    self._requeue(run_id)
                    if not driven:
                        runner.hand_back(state)
                    return runner, state
                why = f"its run {run_id} {state.status} meanwhile"
        return TickResult(tick, self.when(tick), run_id, "skipped", f"skipped: {why}")

    def _requeue(self, run_id: int) -> None:
        """A run started again goes after every run of the schedule (its turn), and counts."""
        q = statements(self.broker, "sbroker.apps.pipeline")
        with self.broker.transaction() as tx:
            tx.execute(q.lock_schedule, (self.name,))
            tx.execute(q.requeue_run, (self.name, run_id))
            count(self.broker, tx, self.name, "started")

    # -- running -----------------------------------------------------------------------------
    def submit(self) -> list[TickResult]:
        """Claim every tick for the servers to drive (in tick order, within the schedule's
        ``max_active_runs``); what became of each."""
        out = []
        for tick in self.ticks:
            claimed = self.claim(tick, driven=False)
            if isinstance(claimed, TickResult):
                out.append(claimed)
            else:
                out.append(TickResult(tick, self.when(tick), claimed[1].run_id, "submitted"))
        return out

    def run(self) -> list[TickResult]:
        """Run the ticks here, ``parallel`` at once, until every one ended; Ctrl-C cancels
        the runs going (resumable: ``--reprocess failed`` runs them again) and raises
        ``KeyboardInterrupt`` once they are put away."""
        results: dict[int, TickResult] = {}
        ticks = iter(enumerate(self.ticks))
        workers = [threading.Thread(target=self._work, args=(ticks, results), daemon=True,
                                    name=f"sbroker-backfill-{i}")
                   for i in range(min(self.parallel, len(self.ticks)))]
        for worker in workers:
            worker.start()
        try:
            _join(workers)
        except KeyboardInterrupt:
            self._stopping.set()
            with self._lock:
                going = sorted(self._active)
            for run_id in going:
                with contextlib.suppress(PipelineError, BrokerError):  # it ended meanwhile
                    cancel_run(self.broker, run_id)
            _join(workers, interruptible=False)
            raise
        return [results[i] for i in sorted(results)]

    def _take(self, ticks: Iterator[tuple[int, float]]) -> tuple[int, float, Claimed] | None:
        """The next tick, claimed; ticks are claimed one at a time, in tick order, so that
        their runs take their turns in tick order.  None once every tick was taken (or
        Ctrl-C came)."""
        with self._claiming:
            with self._lock:
                item = None if self._stopping.is_set() else next(ticks, None)
            if item is None:
                return None
            index, tick = item
            try:
                claimed = self.claim(tick)
            except Exception as exc:  # a database hiccup: the tick failed, the rest go on
                log.exception("backfill %s: tick %s", self.name, self.when(tick))
                claimed = TickResult(tick, self.when(tick), None, "failed", f"error: {exc}")
            if not isinstance(claimed, TickResult):
                with self._lock:
                    self._active.add(claimed[1].run_id)
            return index, tick, claimed

    def _work(self, ticks: Iterator[tuple[int, float]], results: dict[int, TickResult]) -> None:
        while (item := self._take(ticks)) is not None:
            index, tick, claimed = item
            if isinstance(claimed, TickResult):
                result = claimed
            else:
                try:
                    result = self._drive(tick, *claimed)
                except Exception as exc:
                    log.exception("backfill %s: tick %s", self.name, self.when(tick))
                    result = TickResult(tick, self.when(tick), claimed[1].run_id, "failed",
                                        f"error: {exc}")
                finally:
                    with self._lock:
                        self._active.discard(claimed[1].run_id)
            results[index] = result
            if self.on_end is not None:
                self.on_end(result)

    def _drive(self, tick: float, runner: DurableRunner, state: RunState) -> TickResult:
        """Drive the run of ``tick`` (once its turn came) to its end."""
        if self._stopping.is_set():  # Ctrl-C came while it was being claimed
            with contextlib.suppress(PipelineError, BrokerError):
                cancel_run(self.broker, state.run_id)
        if wait_turn(runner, state, threading.Event()):
            if self.on_start is not None:
                self.on_start(TickResult(tick, self.when(tick), state.run_id, "started"))
            state = runner.drive(state)
        status = str(state.status)
        if state.lost:  # another process drives it now: follow it to its end
            status = wait_run(self.broker, state.run_id) or str(RunStatus.FAILED)
        return TickResult(tick, self.when(tick), state.run_id, status)


def _join(workers: list[threading.Thread], *, interruptible: bool = True) -> None:
    """Wait for the workers; Ctrl-C is heard between looks unless not ``interruptible``."""
    while any(w.is_alive() for w in workers):
        try:
            for worker in workers:
                worker.join(JOIN_SECONDS)
        except KeyboardInterrupt:
            if interruptible:
                raise


def plan_backfill(broker: BrokerAPI, name: str, start: str, end: str, *,
                  reprocess: str = "none", parallel: int = 1) -> Backfill:
    """The backfill of schedule ``name`` over [``start``, ``end``) (ISO dates or times in
    the schedule's timezone), checked before anything is done: a one-line
    ``PipelineError`` for an unknown schedule, a bad time or range, a bad option."""
    if reprocess not in REPROCESS:
        raise PipelineError(f"--reprocess must be none, failed or all, not {reprocess!r}")
    if type(parallel) is not int or parallel < 1:
        raise PipelineError(f"--parallel must be an integer >= 1, not {parallel!r}")
    row = get_schedule(broker, name)
    if row is None:
        raise PipelineError(f"there is no schedule {name!r} (`sbroker schedule list` lists"
                            " them)")
    schedule = schedule_of(row)
    times = []
    for option, text in (("--from", start), ("--to", end)):
        try:
            times.append(parse_time(text, schedule.timezone))
        except ValueError as exc:
            raise PipelineError(f"{option}: {exc}") from None
    if times[1] < times[0]:
        raise PipelineError(f"--to {end} comes before --from {start}: give the range as"
                            " --from EARLIER --to LATER")
    try:
        ticks = ticks_between(schedule, times[0], times[1])
    except ValueError as exc:
        raise PipelineError(str(exc)) from None
    pipeline = load_definition(row["file"], json.loads(row["params"] or "{}"), strict=False)
    return Backfill(broker, name, schedule, pipeline, ticks, reprocess, parallel)
