"""Recording a run's stages in the broker database (table ``PipelineTasks``): which stage and
task each ExecutionLog row is, for the dashboard's timeline.  The times themselves are the
ExecutionLog's; this adds only names.  A failure to record is logged and never stops a run.
"""

from __future__ import annotations

import logging
from typing import Any

from sbroker.apps.pipeline.run import PipelineRun, RunObserver, StageRun
from sbroker.engine.api import BrokerAPI
from sbroker.storage import queries

__all__ = ["Observers", "RunRecorder", "recorder_for"]
log = logging.getLogger("sbroker.pipeline")


class Observers(RunObserver):
    """Several observers heard in turn."""

    def __init__(self, *observers: RunObserver) -> None:
        self.observers = observers

    def pipeline_started(self, run: PipelineRun) -> None:
        for o in self.observers:
            o.pipeline_started(run)

    def stage_started(self, run: PipelineRun, stage: StageRun) -> None:
        for o in self.observers:
            o.stage_started(run, stage)

    def task_finished(self, run: PipelineRun, stage: StageRun, task: Any) -> None:
        for o in self.observers:
            o.task_finished(run, stage, task)

    def stage_finished(self, run: PipelineRun, stage: StageRun) -> None:
        for o in self.observers:
            o.stage_finished(run, stage)

    def pipeline_finished(self, run: PipelineRun) -> None:
        for o in self.observers:
            o.pipeline_finished(run)


class RunRecorder(RunObserver):
    """Writes a row per task sent (log id, stage, task name) once its stage is sent."""

    def __init__(self, broker: BrokerAPI, scheduler_handle: str) -> None:
        self.broker = broker
        self.handle = scheduler_handle
        self.sql = queries.load("sbroker.apps.pipeline", f"{broker.dialect}.sql")

    def stage_started(self, run: PipelineRun, stage: StageRun) -> None:
        index = run.stages.index(stage)
        try:
            with self.broker.transaction() as tx:
                tx.execute(self.sql["create_pipeline_tasks"])
                for task in stage.tasks:
                    if task.log_id is not None:
                        tx.execute(self.sql["insert_pipeline_task"], {
                            "log_id": task.log_id, "handle": self.handle,
                            "pipeline": run.pipeline.name, "stage_index": index,
                            "stage": stage.stage.name, "task": task.spec.name})
        except Exception:
            log.exception("could not record the stage of a pipeline run",
                          extra={"stage": stage.stage.name})


def recorder_for(scheduler: object) -> RunRecorder | None:
    """A recorder for a broker's scheduler (one with ``broker`` and an open ``handle``)."""
    broker = getattr(scheduler, "broker", None)
    handle = getattr(scheduler, "handle", None)
    if broker is None or not isinstance(handle, str):
        return None
    return RunRecorder(broker, handle)
