"""What `sbroker serve` does for pipelines (docs/pipelines.md, "Running in production"): it
takes the schedules' timers and creates their due runs, takes over every run that no live
process drives (submitted, handed back by a server that stopped, or whose driver died or was
paused past its lease), and drives each run on a thread of its own.  Stopping it hands every
run it drives back at once, for another server to take."""

from __future__ import annotations

import json
import logging
import math
import sys
import threading
from typing import Any

from sbroker.apps.pipeline.leases import LeaseHeld, LeaseLost, forget_dead_sessions
from sbroker.apps.pipeline.loading import load_definition
from sbroker.apps.pipeline.model import Pipeline
from sbroker.apps.pipeline.parser import PipelineError
from sbroker.apps.pipeline.runner import DurableRunner
from sbroker.apps.pipeline.runstate import RunState
from sbroker.apps.pipeline.schedules import SCHEDULE_QUEUE, fire, wait_turn
from sbroker.apps.pipeline.store import RunStore
from sbroker.core import messages as m
from sbroker.core import threads
from sbroker.engine.api import BrokerAPI

__all__ = ["PipelineService", "load_run_pipeline"]
log = logging.getLogger("sbroker.pipeline")
POLL_SECONDS = 0.5  # a receive of the schedules' timers waits this long (stop is heard)
TAKEOVER_SECONDS = 0.5  # how often the server looks for runs no live process drives
JOIN_SECONDS = 30.0


def _importable(pipeline: Pipeline) -> None:
    """The pipeline's folder on ``sys.path`` for the server's life: its runs' tasks, run by
    this server's readers whichever run they belong to, import their modules from it (a
    folder taken off when one run ends could still be needed by another's)."""
    folder = str(pipeline.base_dir)
    if folder not in sys.path:
        sys.path.append(folder)


def load_run_pipeline(file: str, params: str | None) -> Pipeline:
    """The pipeline of a recorded run: its file, with the run's parameters."""
    if not file:
        raise PipelineError("the run was not started from a pipeline file: only the process"
                            " that started it can drive it")
    values: dict[str, Any] = json.loads(params or "{}")
    return load_definition(file, values, typed=True)


class PipelineService:
    """``start()`` / ``stop()``: a thread on the schedules' timers, one looking for runs to
    take over, and one per run it drives."""

    def __init__(self, broker: BrokerAPI) -> None:
        self.broker = broker
        self.store = RunStore(broker)
        self._stop = threading.Event()
        self._loops: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._drivers: dict[int, threading.Thread] = {}
        self._unloadable: set[int] = set()  # runs whose file could not be loaded (said once)

    def start(self) -> None:
        """Start taking timers and runs."""
        self._stop.clear()
        self._loops = [threading.Thread(target=loop, name=name, daemon=True) for loop, name in (
            (self._timer_loop, "sbroker-schedules"), (self._takeover_loop, "sbroker-takeover"))]
        for thread in self._loops:
            thread.start()

    def stop(self) -> None:
        """Stop: the runs driven here are handed back (their leases end) for another."""
        self._stop.set()
        with self._lock:
            drivers = list(self._drivers.values())
        for thread in [*self._loops, *drivers]:
            threads.join(thread, JOIN_SECONDS)

    @property
    def driving(self) -> list[int]:
        """The ids of the runs this server drives now."""
        with self._lock:
            return sorted(self._drivers)

    # -- schedules -------------------------------------------------------------------------------
    def poll(self, wait: float) -> list[RunState]:
        """Take the timers that fired (waiting up to ``wait`` seconds) and create the due
        runs (their leases held here), in one transaction; the runs created."""
        if SCHEDULE_QUEUE not in self.broker.catalog.queues:
            self._stop.wait(wait)
            return []
        runs: list[RunState] = []
        with self.broker.transaction() as tx:
            for msg in tx.receive(SCHEDULE_QUEUE, timeout=wait):
                if msg.message_type_name == m.DIALOG_TIMER:
                    runs += fire(self.broker, tx, msg.conversation_handle)
        return runs

    def _timer_loop(self) -> None:
        while not self._stop.is_set():
            try:
                runs = self.poll(POLL_SECONDS)
            except Exception:  # a database hiccup: try again, never end the service
                log.exception("the schedules' timers could not be taken")
                self._stop.wait(POLL_SECONDS)
                continue
            for run in runs:
                self._start_driver(DurableRunner(self.broker, run.pipeline,
                                                 schedule=run.schedule), run)

    # -- takeovers ------------------------------------------------------------------------------
    def take_over(self) -> list[int]:
        """One look for runs no live process drives: take the lease of this server's share
        of them (its part among the broker sessions open on the database, at least one) and
        drive each; the ids of the runs taken."""
        taken: list[int] = []
        sessions = forget_dead_sessions(self.broker)  # a dead driver's runs are free at once
        rows = self.store.takeable()
        share = max(1, math.ceil(len(rows) / max(1, sessions)))
        for row in rows:
            run_id = int(row["run_id"])
            with self._lock:
                if run_id in self._drivers or run_id in self._unloadable:
                    continue
            if self._take(row) is not None:
                taken.append(run_id)
                if len(taken) >= share:
                    break
        return taken

    def _take(self, row: dict[str, Any]) -> RunState | None:
        run_id = int(row["run_id"])
        try:
            pipeline = load_run_pipeline(row["file"], row["params"])
            runner = DurableRunner(self.broker, pipeline, schedule=row["schedule"])
            _importable(pipeline)
            state = runner.resume(run_id, takeover=True)
        except LeaseHeld:
            return None  # another server took it first
        except PipelineError as exc:
            with self._lock:
                self._unloadable.add(run_id)
            log.error("run %s of pipeline %s cannot be taken over here: %s", run_id,
                      row["pipeline"], exc)
            return None
        log.info("run %s of pipeline %s taken over", run_id, row["pipeline"])
        self._start_driver(runner, state)
        return state

    def _takeover_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.take_over()
            except Exception:
                log.exception("could not look for runs to take over")
            self._stop.wait(TAKEOVER_SECONDS)

    # -- driving ---------------------------------------------------------------------------------
    def _start_driver(self, runner: DurableRunner, state: RunState) -> None:
        thread = threading.Thread(target=self._drive, args=(runner, state), daemon=True,
                                  name=f"sbroker-run-{state.run_id}")
        with self._lock:
            self._drivers[state.run_id] = thread
        thread.start()

    def _drive(self, runner: DurableRunner, state: RunState) -> None:
        try:
            _importable(runner.pipeline)
            if wait_turn(runner, state, self._stop):
                runner.drive(state, self._stop)
        except LeaseLost:
            log.warning("run %s: another process drives it now; letting it go", state.run_id)
        except Exception:
            log.exception("run %s of pipeline %s stopped", state.run_id, runner.pipeline.name)
        finally:
            with self._lock:
                self._drivers.pop(state.run_id, None)
