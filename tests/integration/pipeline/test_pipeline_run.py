"""One engine: stage files, ``sbroker run``'s command, its display and ``--local`` all go
through the durable runner (a broker on a StubRunner here: no JVM)."""

from __future__ import annotations

import contextlib
import io
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from support.helpers import started

import sbroker
from sbroker.apps.pipeline import (
    Pipeline,
    RunDisplay,
    RunListener,
    RunState,
    TaskState,
    parse_pipeline,
    render_run_report,
    run_command,
    start_run,
)
from sbroker.apps.pipeline.command import RunRequest
from sbroker.apps.spark import StubRunner

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
def broker(tmp_path: Path, stub: StubRunner) -> Iterator[sbroker.Broker]:
    b = started(tmp_path / "runs.db", stub)
    try:
        yield b
    finally:
        b.close()


def _in_thread(target: object) -> tuple[threading.Thread, list[RunState]]:
    out: list[RunState] = []
    thread = threading.Thread(target=lambda: out.append(target()))  # type: ignore[operator]
    thread.start()
    return thread, out


def _keys(stub: StubRunner) -> list[str | None]:
    return [getattr(t, "sql", getattr(t, "target", None)) for _, t, _ in stub.calls]


def test_stages_run_in_order_and_tasks_of_a_stage_together(
        broker: sbroker.Broker, stub: StubRunner) -> None:
    gate = threading.Event()
    stub.on("A1", gate=gate)
    stub.on("A2", gate=gate, value={"rows": 2})
    thread, out = _in_thread(lambda: start_run(broker, parse_pipeline(THREE_STAGES)))
    stub.wait_running(2)  # both tasks of stage a run at once...
    assert sorted(_keys(stub)) == ["A1", "A2"]  # type: ignore[type-var]
    gate.set()  # ...and stage b starts only when they are done
    thread.join(10)
    run = out[0]
    assert run.ok and not run.interrupted
    keys = _keys(stub)
    assert set(keys[:2]) == {"A1", "A2"}
    assert set(keys[2:4]) == {"B1", "pipeline_task_helpers:add"}
    assert keys[4] == "C1"
    assert run.tasks["a/a2"].value == {"rows": 2}
    assert run.tasks["b/b2"].value == 5
    assert {pool for _, _, pool in stub.calls} == {"abc"}


def test_a_failed_stage_skips_the_stages_after_it(broker: sbroker.Broker,
                                                  stub: StubRunner) -> None:
    stub.on("B1", error=ValueError("[UNRESOLVED_COLUMN] no column x\ncontext"))
    run = start_run(broker, parse_pipeline(THREE_STAGES))
    assert not run.ok and run.status == "failed"
    assert {n: t.status for n, t in run.tasks.items()} == {
        "a/a1": "succeeded", "a/a2": "succeeded", "b/b1": "failed", "b/b2": "succeeded",
        "c/c1": "skipped"}
    assert run.tasks["b/b1"].error == "ValueError: [UNRESOLVED_COLUMN] no column x"
    assert "C1" not in _keys(stub)
    report = _text(render_run_report(run))
    assert "pipeline abc failed" in report
    assert "✗ b/b1 (log " in report and "ValueError: [UNRESOLVED_COLUMN] no column x" in report
    assert "skipped: c/c1" in report


def test_concurrency_bounds_tasks_in_flight(broker: sbroker.Broker, stub: StubRunner) -> None:
    gate = threading.Event()
    text = ("[options]\nconcurrency = 2\n[[stage]]\n"
            + "".join(f'[[stage.task]]\nsql = "S{i}"\n' for i in range(6)))
    for i in range(6):
        stub.on(f"S{i}", gate=gate)
    thread, out = _in_thread(lambda: start_run(broker, parse_pipeline(text)))
    assert len(stub.wait_running(2)) == 2
    gate.set()
    thread.join(10)
    assert out[0].ok and stub.max_running == 2 and len(stub.calls) == 6


class _Recorder(RunListener):
    def __init__(self) -> None:
        self.events: list[str] = []

    def run_started(self, run: RunState) -> None:
        self.events.append("start")

    def task_started(self, run: RunState, task: TaskState) -> None:
        self.events.append(f"started {task.name} {task.attempts}")

    def task_finished(self, run: RunState, task: TaskState) -> None:
        how = "skipped" if task.ended is None else task.ended.status
        self.events.append(f"ended {task.name} {task.status} ({how})")

    def run_finished(self, run: RunState) -> None:
        self.events.append(f"finish {run.status}")


def test_listeners_hear_every_step(broker: sbroker.Broker, stub: StubRunner) -> None:
    stub.on("X", error=RuntimeError("no"))
    pipeline = parse_pipeline('[[task]]\nname = "t"\nsql = "X"\n'
                              '[[task]]\nname = "u"\nsql = "Y"\nafter = ["t"]\n')
    recorder = _Recorder()
    start_run(broker, pipeline, listener=recorder)
    assert recorder.events == ["start", "started t 1", "ended t failed (failed)",
                               "ended u skipped (skipped)", "finish failed"]


def test_the_display_prints_a_line_per_event_and_the_table(broker: sbroker.Broker) -> None:
    console = Console(file=io.StringIO(), width=120)
    start_run(broker, parse_pipeline(THREE_STAGES), listener=RunDisplay(console))
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "run 1 of pipeline abc started: 5 tasks" in out
    assert "  b/b2 succeeded in " in out and ": 5" in out
    assert "pipeline abc succeeded in" in out
    header = next(line for line in out.splitlines() if "task" in line and "status" in line)
    assert [c.strip() for c in header.split("┃")[1:-1]] == [
        "task", "status", "attempts", "time", "value", "error"]
    for name in ("a/a1", "a/a2", "b/b1", "b/b2", "c/c1"):
        assert f" {name} " in out  # the summary table has every task


def _text(renderable: object) -> str:
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


def _opener(broker: sbroker.Broker) -> object:
    @contextlib.contextmanager
    def open_broker(pipeline: Pipeline) -> Iterator[sbroker.Broker]:
        yield broker

    return open_broker


def test_run_command_exit_codes(tmp_path: Path, broker: sbroker.Broker, stub: StubRunner,
                                capsys: pytest.CaptureFixture[str]) -> None:
    console = Console(file=io.StringIO(), width=100)
    opener = _opener(broker)
    code, run = run_command(_write(tmp_path, THREE_STAGES), console=console,
                            open_broker=opener)  # type: ignore[arg-type]
    assert code == 0 and run is not None and run.ok
    stub.on("C1", error=RuntimeError("bad"))
    code, run = run_command(_write(tmp_path, THREE_STAGES), console=console,
                            open_broker=opener)  # type: ignore[arg-type]
    assert code == 1 and run is not None and run.tasks["c/c1"].status == "failed"
    code, run = run_command(_write(tmp_path, THREE_STAGES), ["nope=1"], console=console,
                            open_broker=opener)  # type: ignore[arg-type]
    assert (code, run) == (2, None)
    assert capsys.readouterr().err.strip().endswith("unknown parameter 'nope' "
                                                    "(the file declares: none)")
    code, run = run_command(_write(tmp_path, THREE_STAGES), console=console,
                            open_broker=opener,  # type: ignore[arg-type]
                            request=RunRequest(resume=1, rerun_from="nope"))
    assert (code, run) == (2, None)
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "--from names 'nope', which is not a task of pipeline 'abc'" in line


def test_run_command_checks_python_targets_before_running(
        tmp_path: Path, broker: sbroker.Broker, stub: StubRunner,
        capsys: pytest.CaptureFixture[str]) -> None:
    text = THREE_STAGES.replace("pipeline_task_helpers:add", "pipeline_task_helpers:ad")
    code, run = run_command(_write(tmp_path, text), console=Console(file=io.StringIO()),
                            open_broker=_opener(broker))  # type: ignore[arg-type]
    assert (code, run) == (2, None)
    err = capsys.readouterr().err.strip()
    assert err.startswith("sbroker: error: ") and f"{tmp_path / 'p.toml'}:17: task 'b2'" in err
    assert "has no attribute 'ad'" in err
    assert stub.calls == []


def test_a_pipeline_module_next_to_the_file_is_importable(tmp_path: Path,
                                                          broker: sbroker.Broker) -> None:
    (tmp_path / "my_tasks_for_sbroker_test.py").write_text(
        "def hello(spark, who):\n    return f'hello {who}'\n")
    path = _write(tmp_path, '[[task]]\nname = "h"\n'
                            'python = "my_tasks_for_sbroker_test:hello"\nargs = {who = "x"}\n')
    code, run = run_command(path, console=Console(file=io.StringIO()),
                            open_broker=_opener(broker))  # type: ignore[arg-type]
    assert code == 0 and run is not None
    assert run.tasks["h"].value == "hello x"
