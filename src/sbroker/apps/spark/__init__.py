"""The Spark side of sbroker: the task scheduler's task types, runner interface and runners,
and the ``sbroker`` data source that streams broker queues through Spark (``register``).

Importing this package does not import pyspark; ``SparkRunner`` imports it when it first
creates a session, ``register`` when it registers the data source.
"""

from __future__ import annotations

from sbroker.apps.spark.config import DEFAULT_CONF, DEFAULT_CONNECT_TIMEOUT, SparkConfig
from sbroker.apps.spark.registration import register
from sbroker.apps.spark.runner import (
    Execution,
    Runner,
    RunOutcome,
    SparkProgress,
    execute,
    json_value,
    spark_ids_json,
)
from sbroker.apps.spark.session import (
    LazySparkSession,
    SparkRunner,
    SparkUnavailable,
    create_session,
    job_tag,
)
from sbroker.apps.spark.stub import StubBehaviour, StubRunner
from sbroker.apps.spark.tasks import (
    PythonTask,
    SparkSQL,
    Task,
    TaskCancelled,
    TaskError,
    TaskFailed,
    TaskResult,
    TaskStatus,
    as_task,
    describe_task,
    one_line_error,
    resolve_target,
    task_from_dict,
    task_from_json,
    task_to_dict,
    task_to_json,
    task_traceback,
)

__all__ = [
    "DEFAULT_CONF",
    "DEFAULT_CONNECT_TIMEOUT",
    "Execution",
    "LazySparkSession",
    "PythonTask",
    "RunOutcome",
    "Runner",
    "SparkConfig",
    "SparkProgress",
    "SparkRunner",
    "SparkSQL",
    "SparkUnavailable",
    "StubBehaviour",
    "StubRunner",
    "Task",
    "TaskCancelled",
    "TaskError",
    "TaskFailed",
    "TaskResult",
    "TaskStatus",
    "as_task",
    "create_session",
    "describe_task",
    "execute",
    "job_tag",
    "json_value",
    "one_line_error",
    "register",
    "resolve_target",
    "spark_ids_json",
    "task_from_dict",
    "task_from_json",
    "task_to_dict",
    "task_to_json",
    "task_traceback",
]
