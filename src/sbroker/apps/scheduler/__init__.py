"""The asynchronous task scheduler of seed 002 on sbroker, running tasks on Spark."""

from __future__ import annotations

from sbroker.apps.scheduler.client import Scheduler, cancel_task
from sbroker.apps.scheduler.executor import (
    executor_procedure,
    recover_dead_tasks,
    serve,
    serve_one,
)

__all__ = ["Scheduler", "cancel_task", "executor_procedure", "recover_dead_tasks", "serve",
           "serve_one"]
