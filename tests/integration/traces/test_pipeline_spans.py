"""A pipeline run is one trace: the run is the root span, each task a child, each
attempt a child of its task with the executor's spans under it, the wait before a retry a
span of its own, and the Spark jobs a task started are events carrying their job ids (here
from a StubRunner's scripted job ids, so no JVM starts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from support.otel import named, traced, tree

import sbroker
from sbroker.apps.pipeline import parse_pipeline, start_run
from sbroker.apps.spark import StubRunner
from sbroker.apps.spark.stub import StubBehaviour


def _pipeline(counter: Path) -> Any:
    return parse_pipeline(f"""
[pipeline]
name = "traced"

[[task]]
name = "extract"
python = "pipeline_task_helpers:flaky"
retries = 1
retry_delay = "50ms"
args = {{ path = "{counter}", fails = 1 }}

[[task]]
name = "load"
sql = "SELECT 42"
after = ["extract"]
""")


def _names(node: tuple[str, list[Any]]) -> list[str]:
    return [child[0] for child in node[1]]


def _below(node: tuple[str, list[Any]], name: str) -> list[tuple[str, list[Any]]]:
    """Every subtree named ``name`` under ``node``."""
    out = [child for child in node[1] if child[0] == name]
    for child in node[1]:
        out += _below(child, name)
    return out


def test_a_run_with_a_retried_task_is_one_tree(tmp_path: Path) -> None:
    stub = StubRunner({"SELECT 42": StubBehaviour(value=42, spark_job_ids=[7, 8])})
    with traced() as t:
        b = sbroker.Broker.open(tmp_path / "p.db", instrumentation=t.instrumentation)
        try:
            b.install_executor(max_queue_readers=2, runner=stub)
            b.start()
            state = start_run(b, _pipeline(tmp_path / "calls"))
        finally:
            b.close()
        spans = t.spans()
    assert state.status == "succeeded" and state.tasks["extract"].attempts == 2
    (run,) = named(spans, "pipeline.run")
    assert run.parent is None and (run.attributes or {})["sbroker.run.id"] == state.run_id
    # one trace, but for the executor reading the run's EndDialog (if it did before the
    # close), which no SEND made: roots of their own, linked to nothing
    others = [s for s in spans if s.context.trace_id != run.context.trace_id]
    assert {s.name for s in others} <= {"process", "receive"}
    assert all(s.parent is None and not s.links for s in others)
    root = tree(spans, run)
    tasks = [k for k in root[1] if k[0] == "pipeline.task"]
    assert len(tasks) == 2
    extract, load = tasks
    assert _names(extract) == ["pipeline.attempt", "pipeline.retry_delay", "pipeline.attempt"]
    assert _names(load) == ["pipeline.attempt"]
    # under each attempt: its AsyncSent's send; under that the executor's receive and its
    # process, with the task's own span and the AsyncDone's send in the process
    for attempt in [k for k in extract[1] if k[0] == "pipeline.attempt"] + load[1]:
        (send,) = [k for k in attempt[1] if k[0] == "send"]
        assert _names(send) == ["receive", "process"]
        (process,) = _below(send, "process")
        assert sorted(_names(process)) == ["send", "task"]
    executed = named(spans, "task")
    by_status = sorted(str((s.attributes or {})["sbroker.task.status"]) for s in executed)
    assert by_status == ["failed", "succeeded", "succeeded"]
    (delay,) = named(spans, "pipeline.retry_delay")
    assert _seconds(delay) >= 0.05
    assert (delay.attributes or {})["sbroker.retry.delay_seconds"] > 0
    (sql_task,) = [s for s in executed if (s.attributes or {})["sbroker.task.type"] == "sql"]
    assert [(e.name, dict(e.attributes or {})) for e in sql_task.events] == [
        ("spark.job", {"spark.job.id": 7}), ("spark.job", {"spark.job.id": 8})]


def _seconds(span: ReadableSpan) -> float:
    assert span.start_time is not None and span.end_time is not None
    return (span.end_time - span.start_time) / 1e9
