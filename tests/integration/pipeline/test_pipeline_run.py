"""Running pipelines through a scheduler (LocalScheduler over a StubRunner: no JVM)."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from sbroker.apps.pipeline import (
    LiveDisplay,
    LocalScheduler,
    PipelineRun,
    PlainDisplay,
    RunObserver,
    StageRun,
    TaskRun,
    local_scheduler,
    parse_pipeline,
    render_report,
    run_command,
    run_pipeline,
)
from sbroker.apps.spark import (
    SparkProgress,
    SparkSQL,
    StubRunner,
    Task,
    TaskResult,
)

THREE_STAGES = """
[pipeline]
name = "abc"
[[stage]]
name = "a"
[[stage.task]]
name = "a1"
sql = "A1"
[[stage.task]]
name = "a2"
sql = "A2"
[[stage]]
name = "b"
[[stage.task]]
name = "b1"
sql = "B1"
[[stage.task]]
name = "b2"
python = "pipeline_task_helpers:add"
args = { a = 2, b = 3 }
[[stage]]
name = "c"
[[stage.task]]
name = "c1"
sql = "C1"
"""


@pytest.fixture
def stub() -> StubRunner:
    return StubRunner()


@pytest.fixture
def scheduler(stub: StubRunner) -> Iterator[LocalScheduler]:
    with LocalScheduler(stub, max_concurrency=4, pool="abc") as s:
        yield s


def _in_thread(target: object) -> tuple[threading.Thread, list[PipelineRun]]:
    out: list[PipelineRun] = []
    thread = threading.Thread(target=lambda: out.append(target()))  # type: ignore[operator]
    thread.start()
    return thread, out


def test_stages_run_in_order_and_tasks_of_a_stage_together(
        stub: StubRunner, scheduler: LocalScheduler) -> None:
    gate = threading.Event()
    stub.on("A1", gate=gate)
    stub.on("A2", gate=gate, value={"rows": 2})
    pipeline = parse_pipeline(THREE_STAGES)
    thread, out = _in_thread(lambda: run_pipeline(pipeline, scheduler))
    stub.wait_running(2)  # both tasks of stage a run at once...
    assert sorted(t.sql for _, t, _ in stub.calls) == ["A1", "A2"]  # type: ignore[union-attr]
    gate.set()  # ...and stage b starts only when they are done
    thread.join(10)
    run = out[0]
    assert run.ok and not run.interrupted
    assert [s.state for s in run.stages] == ["succeeded"] * 3
    keys = [getattr(t, "sql", getattr(t, "target", None)) for _, t, _ in stub.calls]
    assert set(keys[:2]) == {"A1", "A2"}
    assert set(keys[2:4]) == {"B1", "pipeline_task_helpers:add"}
    assert keys[4] == "C1"
    results = {t.spec.name: t.result for s in run.stages for t in s.tasks}
    assert results["a2"].value == {"rows": 2}  # type: ignore[union-attr]
    assert results["b2"].value == 5  # type: ignore[union-attr]
    assert {pool for _, _, pool in stub.calls} == {"abc"}


def test_the_first_failed_stage_stops_the_run(stub: StubRunner,
                                              scheduler: LocalScheduler) -> None:
    stub.on("B1", error=ValueError("[UNRESOLVED_COLUMN] no column x\ncontext"))
    run = run_pipeline(parse_pipeline(THREE_STAGES), scheduler)
    assert not run.ok
    assert [s.state for s in run.stages] == ["succeeded", "failed", "skipped"]
    assert run.failed_stage is run.stages[1]
    [failed] = run.stages[1].failed
    assert failed.spec.name == "b1"
    assert failed.result.error == "ValueError: [UNRESOLVED_COLUMN] no column x"  # type: ignore[union-attr]
    assert "C1" not in [getattr(t, "sql", None) for _, t, _ in stub.calls]
    report = _text(render_report(run))
    assert "failed at stage 'b'" in report
    assert "✗ b1 (log " in report and "ValueError: [UNRESOLVED_COLUMN] no column x" in report
    assert "not run: c" in report


def test_max_concurrency_bounds_tasks_in_flight(stub: StubRunner) -> None:
    gate = threading.Event()
    text = "[[stage]]\n" + "".join(f'[[stage.task]]\nsql = "S{i}"\n' for i in range(6))
    for i in range(6):
        stub.on(f"S{i}", gate=gate)
    with LocalScheduler(stub, max_concurrency=2) as scheduler:
        thread, out = _in_thread(lambda: run_pipeline(parse_pipeline(text), scheduler))
        assert len(stub.wait_running(2)) == 2
        gate.set()
        thread.join(10)
    assert out[0].ok and stub.max_running == 2 and len(stub.calls) == 6


class _Interrupting:
    """A scheduler whose first synchronize is interrupted by Ctrl-C."""

    def __init__(self, inner: LocalScheduler) -> None:
        self.inner = inner
        self.cancelled: list[int] = []
        self.interrupted = False

    def exec_async(self, task: Task | str) -> int:
        return self.inner.exec_async(task)

    def synchronize(self, timeout: float | None = None) -> TaskResult:
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt
        return self.inner.synchronize(timeout)

    def cancel(self, log_id: int) -> None:
        self.cancelled.append(log_id)
        self.inner.cancel(log_id)


def test_ctrl_c_cancels_the_running_stage(stub: StubRunner, scheduler: LocalScheduler) -> None:
    gate = threading.Event()  # never opened: only cancellation ends these tasks
    stub.on("A1", gate=gate)
    stub.on("A2", gate=gate)
    interrupting = _Interrupting(scheduler)
    run = run_pipeline(parse_pipeline(THREE_STAGES), interrupting)
    assert run.interrupted and not run.ok
    assert len(interrupting.cancelled) == 2
    assert [t.state for t in run.stages[0].tasks] == ["cancelled", "cancelled"]
    assert [s.state for s in run.stages] == ["cancelled", "skipped", "skipped"]
    assert "was interrupted at stage 'a'" in _text(render_report(run))


class _Recorder(RunObserver):
    def __init__(self) -> None:
        self.events: list[str] = []

    def pipeline_started(self, run: PipelineRun) -> None:
        self.events.append("start")

    def stage_started(self, run: PipelineRun, stage: StageRun) -> None:
        self.events.append(f"stage {stage.stage.name}")

    def task_finished(self, run: PipelineRun, stage: StageRun, task: TaskRun) -> None:
        self.events.append(f"task {task.spec.name} {task.state}")

    def stage_finished(self, run: PipelineRun, stage: StageRun) -> None:
        self.events.append(f"end {stage.stage.name} {stage.state}")

    def pipeline_finished(self, run: PipelineRun) -> None:
        self.events.append("finish")


def test_observers_hear_every_step(scheduler: LocalScheduler) -> None:
    pipeline = parse_pipeline('[[stage]]\nname = "only"\n[[stage.task]]\nname = "t"\n'
                              'sql = "X"\n')
    recorder = _Recorder()
    run_pipeline(pipeline, scheduler, observer=recorder)
    assert recorder.events == ["start", "stage only", "task t succeeded",
                               "end only succeeded", "finish"]


def test_plain_display_prints_a_line_per_event(scheduler: LocalScheduler) -> None:
    console = Console(file=io.StringIO(), width=100)
    run_pipeline(parse_pipeline(THREE_STAGES), scheduler, observer=PlainDisplay(console))
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "pipeline abc: 3 stages, 5 tasks" in out
    assert "stage b: 2 tasks sent" in out
    assert "b/b2 succeeded in " in out and ": 5" in out
    assert "pipeline abc succeeded in" in out
    for name in ("a1", "a2", "b1", "b2", "c1"):
        assert f"  {name} " in out  # the summary table has every task


def test_live_display_shows_running_tasks_with_spark_progress(
        stub: StubRunner, scheduler: LocalScheduler) -> None:
    gate = threading.Event()
    stub.on("A1", gate=gate, progress=SparkProgress(jobs=1, tasks=8, completed_tasks=3))
    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    display = LiveDisplay(console, monitor=scheduler, refresh_per_second=50)
    thread, out = _in_thread(lambda: run_pipeline(parse_pipeline(THREE_STAGES), scheduler,
                                                  observer=display))
    stub.wait_running(1)
    frame = _text(display._live.renderable)  # type: ignore[union-attr]
    assert "3/8 spark tasks" in frame and "running" in frame
    gate.set()
    thread.join(10)
    assert out[0].ok
    assert "pipeline abc succeeded" in console.file.getvalue()  # type: ignore[attr-defined]


def _text(renderable: object) -> str:
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


def test_run_command_exit_codes(tmp_path: Path, stub: StubRunner,
                                capsys: pytest.CaptureFixture[str]) -> None:
    opener = local_scheduler(lambda pipeline: stub)
    console = Console(file=io.StringIO(), width=100)
    code, run = run_command(_write(tmp_path, THREE_STAGES), console=console,
                            open_scheduler=opener)
    assert code == 0 and run is not None and run.ok
    assert stub.closed  # the opener closes the runner it made

    stub.on("C1", error=RuntimeError("bad"))
    code, run = run_command(_write(tmp_path, THREE_STAGES), console=console,
                            open_scheduler=opener)
    assert code == 1 and run is not None and run.failed_stage.stage.name == "c"  # type: ignore[union-attr]

    code, run = run_command(_write(tmp_path, THREE_STAGES), ["nope=1"], console=console,
                            open_scheduler=opener)
    assert (code, run) == (2, None)
    assert capsys.readouterr().err.strip().endswith("unknown parameter 'nope' "
                                                    "(the file declares: none)")


def test_run_command_checks_python_targets_before_running(
        tmp_path: Path, stub: StubRunner, capsys: pytest.CaptureFixture[str]) -> None:
    text = THREE_STAGES.replace("pipeline_task_helpers:add", "pipeline_task_helpers:ad")
    code, run = run_command(_write(tmp_path, text), console=Console(file=io.StringIO()),
                            open_scheduler=local_scheduler(lambda pipeline: stub))
    assert (code, run) == (2, None)
    err = capsys.readouterr().err.strip()
    assert err.startswith("sbroker: error: ") and f"{tmp_path / 'p.toml'}:17: task 'b2'" in err
    assert "has no attribute 'ad'" in err
    assert stub.calls == []


def test_a_pipeline_module_next_to_the_file_is_importable(tmp_path: Path,
                                                          stub: StubRunner) -> None:
    (tmp_path / "my_tasks_for_sbroker_test.py").write_text(
        "def hello(spark, who):\n    return f'hello {who}'\n")
    path = _write(tmp_path, '[[stage]]\n[[stage.task]]\n'
                            'python = "my_tasks_for_sbroker_test:hello"\nargs = {who = "x"}\n')
    code, run = run_command(path, console=Console(file=io.StringIO()),
                            open_scheduler=local_scheduler(lambda pipeline: stub))
    assert code == 0
    assert run.stages[0].tasks[0].result.value == "hello x"  # type: ignore[union-attr]


def test_local_scheduler_cancel_wait_all_and_timeouts(stub: StubRunner) -> None:
    gate = threading.Event()
    stub.on("SLOW", gate=gate)
    with LocalScheduler(stub, max_concurrency=1) as scheduler:
        with pytest.raises(RuntimeError, match="no task outstanding"):
            scheduler.synchronize()
        running = scheduler.exec_async(SparkSQL("SLOW"))
        queued = scheduler.exec_async("QUEUED")
        stub.wait_started(running)
        assert scheduler.started_at(running) is not None
        assert scheduler.started_at(queued) is None
        with pytest.raises(TimeoutError):
            scheduler.synchronize(timeout=0.01)
        scheduler.cancel(queued)
        scheduler.cancel(running)
        from sbroker.apps.spark import TaskFailed

        with pytest.raises(TaskFailed) as caught:
            scheduler.wait_all()
    statuses = {r.log_id: r.status for r in caught.value.results}
    assert statuses == {running: "cancelled", queued: "cancelled"}
    assert [log_id for log_id, _, _ in stub.calls] == [running]  # the queued one never ran
