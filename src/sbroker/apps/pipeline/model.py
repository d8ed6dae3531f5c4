"""A parsed pipeline file: stages of tasks and the options they run with (frozen data)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from sbroker.apps.spark.config import SparkConfig
from sbroker.apps.spark.tasks import Task

__all__ = ["Options", "Pipeline", "Stage", "TaskSpec"]


@dataclass(frozen=True)
class TaskSpec:
    """One ``[[stage.task]]``: its name, the task to send, and its line in the file."""

    name: str
    task: Task
    line: int | None = None


@dataclass(frozen=True)
class Stage:
    """One ``[[stage]]``: tasks that run concurrently; the next stage waits for all of them."""

    name: str
    tasks: tuple[TaskSpec, ...]
    line: int | None = None


@dataclass(frozen=True)
class Options:
    """``[options]``: tasks in flight at once (``None``: no limit) and where Spark runs."""

    concurrency: int | None = None
    spark: SparkConfig = field(default_factory=SparkConfig)


@dataclass(frozen=True)
class Pipeline:
    """A whole pipeline file after parameters were substituted."""

    name: str
    stages: tuple[Stage, ...]
    options: Options = field(default_factory=Options)
    description: str = ""
    params: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    path: Path | None = None

    @property
    def task_count(self) -> int:
        """Number of tasks over all stages."""
        return sum(len(stage.tasks) for stage in self.stages)

    @property
    def base_dir(self) -> Path:
        """The folder of the pipeline file: ``run`` puts it on ``sys.path`` for its modules."""
        return self.path.resolve().parent if self.path is not None else Path.cwd()
