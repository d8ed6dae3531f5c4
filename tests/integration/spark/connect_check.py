"""Run in a child process by test_spark_connect: PySpark refuses a Connect session in a process
that already has a classic one (the test run's shared session), so the checks live here and
report what they saw as one JSON line on stdout."""

from __future__ import annotations

import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from sbroker.apps.spark import (
    PythonTask,
    SparkConfig,
    SparkRunner,
    SparkSQL,
    execute,
)

LONG_QUERY = SparkSQL("SELECT count(*) FROM range(0, 50000000000, 1, 2)")


def main(url: str) -> dict[str, object]:
    """Run a SQL task, a Python task and a cancelled long query over Spark Connect."""
    runner = SparkRunner(SparkConfig(remote=url))
    seen: dict[str, object] = {}
    try:
        outcome = runner.run(SparkSQL("SELECT :x + 1 AS y", {"x": 41}), log_id=201)
        seen["sql_value"] = outcome.value
        seen["sql_job_ids"] = outcome.spark_job_ids
        seen["sql_operation_ids"] = bool(outcome.operation_ids) and all(
            isinstance(op, str) and len(op) >= 32 for op in outcome.operation_ids)
        seen["python_value"] = runner.run(PythonTask("spark_task_helpers:untouched", x=4),
                                          log_id=202).value
        seen["tags_after"] = sorted(runner.session().getTags())
        with ThreadPoolExecutor(1) as pool:
            future = pool.submit(execute, runner, LONG_QUERY, log_id=203)
            tick = threading.Event()
            deadline = time.monotonic() + 180
            while not ((p := runner.progress(203)) and p.tasks):  # reported by the server
                if time.monotonic() > deadline or future.done():
                    break
                tick.wait(0.05)
            seen["progress_tasks"] = p.tasks if p else None
            seen["cancel_returned"] = runner.cancel(203)
            execution = future.result(timeout=180)
        seen["long_status"] = execution.status
    finally:
        runner.close()
    return seen


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
