"""The broker service `sbroker serve` runs for schedules: it takes the schedules' timers,
creates their due runs (``schedules.fire``) and drives each run on a thread it owns, one
schedule's runs one after the other."""

from __future__ import annotations

import logging
import queue
import threading

from sbroker.apps.pipeline.command import pipeline_import_path
from sbroker.apps.pipeline.durable import DurableRunner
from sbroker.apps.pipeline.runstate import RunState
from sbroker.apps.pipeline.schedules import SCHEDULE_QUEUE, fire
from sbroker.core import messages as m
from sbroker.engine.api import BrokerAPI

__all__ = ["ScheduleService"]
log = logging.getLogger("sbroker.pipeline")
POLL_SECONDS = 0.5  # a receive waits this long, so that stop() is heard soon


class ScheduleService:
    """``start()`` / ``stop()``: a thread on the schedules' queue, and one per schedule that
    has runs to drive."""

    def __init__(self, broker: BrokerAPI) -> None:
        self.broker = broker
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._workers: dict[str, tuple[threading.Thread, queue.Queue[RunState]]] = {}

    def start(self) -> None:
        """Start taking timers."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="sbroker-schedules",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop taking timers; runs being driven are left as they stand (resumable)."""
        self._stop.set()
        threads = [self._thread, *(w for w, _ in self._workers.values())]
        for thread in threads:
            if thread is not None:
                thread.join(30)

    def poll(self, wait: float) -> list[RunState]:
        """Take the timers that fired (waiting up to ``wait`` seconds) and create the due
        runs, in one transaction; the runs created."""
        if SCHEDULE_QUEUE not in self.broker.catalog.queues:
            self._stop.wait(wait)
            return []
        runs: list[RunState] = []
        with self.broker.transaction() as tx:
            for msg in tx.receive(SCHEDULE_QUEUE, timeout=wait):
                if msg.message_type_name == m.DIALOG_TIMER:
                    runs += fire(self.broker, tx, msg.conversation_handle)
        return runs

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                runs = self.poll(POLL_SECONDS)
            except Exception:  # a database hiccup: try again, never end the service
                log.exception("the schedules' timers could not be taken")
                self._stop.wait(POLL_SECONDS)
                continue
            for run in runs:
                self._hand_over(run)

    def _hand_over(self, run: RunState) -> None:
        name = run.pipeline.name
        worker = self._workers.get(name)
        if worker is None or not worker[0].is_alive():
            runs: queue.Queue[RunState] = queue.Queue()
            thread = threading.Thread(target=self._drive, args=(runs,),
                                      name=f"sbroker-schedule-{name}", daemon=True)
            worker = self._workers[name] = (thread, runs)
            thread.start()
        worker[1].put(run)

    def _drive(self, runs: queue.Queue[RunState]) -> None:
        while not self._stop.is_set():
            try:
                run = runs.get(timeout=POLL_SECONDS)
            except queue.Empty:
                continue
            try:
                with pipeline_import_path(run.pipeline):
                    DurableRunner(self.broker, run.pipeline).drive(run, self._stop)
            except Exception:
                log.exception("run %s of schedule %s stopped", run.run_id, run.pipeline.name)
