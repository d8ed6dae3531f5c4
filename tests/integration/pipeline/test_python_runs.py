"""Python pipelines run by the one durable runner (docs/pipelines.md): values passed by
parameter name, mapped tasks expanded at run time into ``task[i]`` instances (each retried
and resumed on its own), ``pipe.run`` / ``pipe.resume``, what a resume runs again when code
changed, and a TOML file's ``map`` and values. Tasks go to a StubRunner, which calls the
functions for real with no Spark."""

from __future__ import annotations

import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sbroker
from sbroker.apps.pipeline import (
    PipelineService,
    get_run,
    parse_pipeline,
    resume_run,
    run_attempts,
    start_run,
    submit_run,
    wait_run,
)
from sbroker.apps.pipeline.loading import bind_inputs, find_pipeline
from sbroker.apps.spark import StubRunner

pytestmark = pytest.mark.usefixtures("own_imports")


def started(target: str | Path) -> sbroker.Broker:
    b = sbroker.Broker.open(target)
    b.install_executor(max_queue_readers=4, runner=StubRunner())
    return b.start()


@pytest.fixture
def broker(database: str) -> Iterator[sbroker.Broker]:
    with started(database) as b:
        yield b


@pytest.fixture
def sqlite_broker(tmp_path: Path) -> Iterator[sbroker.Broker]:
    with started(tmp_path / "runs.db") as b:
        yield b


def attempts(broker: sbroker.Broker, run_id: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in run_attempts(broker, run_id):
        out[str(a["task"])] = out.get(str(a["task"]), 0) + 1
    return out


def shop(marker: Path | None = None) -> sbroker.Pipeline:
    pipe = sbroker.Pipeline("shop", concurrency=4, retries=1, retry_delay="10ms")

    @pipe.task()
    def days(month: str = "2026-11") -> list[str]:
        return [f"{month}-{d:02d}" for d in range(1, 4)]

    @pipe.task(map=days, timeout="10m")
    def load(spark: Any, item: str) -> int:
        if marker is not None and item.endswith("-02") and not marker.exists():
            marker.touch()  # the second item fails once: its retry succeeds
            raise ConnectionError("the warehouse did not answer")
        return int(item[-2:]) * 10

    @pipe.task(after=[load])
    def total(load: list[int], days: list[str]) -> dict[str, int]:
        return {"days": len(days), "sum": sum(load)}

    return pipe


def test_values_pass_by_name_and_a_mapped_task_runs_per_item(broker: sbroker.Broker,
                                                             tmp_path: Path) -> None:
    state = shop(tmp_path / "failed-once").run(broker, params={"month": "2027-01"})
    assert state.status == "succeeded", {n: t.error for n, t in state.tasks.items()}
    assert state.tasks["days"].value == ["2027-01-01", "2027-01-02", "2027-01-03"]
    assert state.tasks["load"].value == [10, 20, 30]
    assert [state.tasks[f"load[{i}]"].value for i in range(3)] == [10, 20, 30]
    assert state.tasks["total"].value == {"days": 3, "sum": 60}
    tries = attempts(broker, state.run_id)
    assert tries == {"days": 1, "load[0]": 1, "load[1]": 2, "load[2]": 1, "total": 1}


def test_a_mapped_task_over_what_is_not_a_list_fails_saying_so(
        sqlite_broker: sbroker.Broker) -> None:
    pipe = sbroker.Pipeline("p")

    @pipe.task()
    def rows() -> dict[str, int]:
        return {"a": 1}

    @pipe.task(map=rows)
    def each(item: Any) -> Any:
        return item

    @pipe.task(after=[each])
    def last() -> None: ...

    state = pipe.run(sqlite_broker)
    assert state.status == "failed"
    assert state.tasks["each"].status == "failed"
    assert state.tasks["each"].error == ("task 'each' maps over 'rows', whose value is dict, "
                                         "not a list")
    assert state.tasks["last"].status == "skipped"


def test_an_empty_list_maps_to_an_empty_list(sqlite_broker: sbroker.Broker) -> None:
    pipe = sbroker.Pipeline("p")

    @pipe.task()
    def nothing() -> list[int]:
        return []

    @pipe.task(map=nothing)
    def each(item: int) -> int:
        return item

    @pipe.task(after=[each])
    def count(each: list[int]) -> int:
        return len(each) + 1

    state = pipe.run(sqlite_broker)
    assert (state.status, state.tasks["each"].value, state.tasks["count"].value) == (
        "succeeded", [], 1)


def test_a_value_that_is_not_json_fails_the_attempt(sqlite_broker: sbroker.Broker) -> None:
    pipe = sbroker.Pipeline("p")

    @pipe.task()
    def frame() -> object:
        return object()

    state = pipe.run(sqlite_broker)
    assert state.status == "failed"
    assert state.tasks["frame"].error == (
        "TypeError: task 'frame' returned a object, which is not a JSON value: return "
        "numbers, text, lists and dicts (for data, write a table and return its path)")


FLOW = '''
import pathlib
import sbroker

pipe = sbroker.Pipeline("flow", retries=0)
HERE = pathlib.Path(__file__).parent


@pipe.task()
def numbers(count=3):
    return list(range(count))


@pipe.task(map=numbers)
def square(item):
    if (HERE / f"fail-{item}").exists():
        raise RuntimeError(f"item {item} failed")
    (HERE / f"ran-{item}").write_text(str(int((HERE / f"ran-{item}").read_text() or 0) + 1)
                                      if (HERE / f"ran-{item}").exists() else "1")
    return item * item


@pipe.task(after=[square])
def total(square):
    return sum(square)
'''


def load_flow(folder: Path, text: str = FLOW) -> sbroker.Pipeline:
    folder.mkdir(exist_ok=True)
    (folder / "flow_runs.py").write_text(textwrap.dedent(text))
    sys.modules.pop("flow_runs", None)  # a fresh process would import the file anew
    return find_pipeline(f"{folder / 'flow_runs.py'}:pipe")


def ran(folder: Path) -> dict[int, int]:
    return {int(p.name[4:]): int(p.read_text()) for p in folder.glob("ran-*")}


def test_a_resume_runs_only_the_instances_that_did_not_succeed(
        sqlite_broker: sbroker.Broker, tmp_path: Path) -> None:
    folder = tmp_path / "flow"
    pipe = load_flow(folder)
    (folder / "fail-1").touch()
    first = pipe.run(sqlite_broker)
    assert first.status == "failed" and first.tasks["square[1]"].status == "failed"
    assert first.tasks["total"].status == "skipped" and ran(folder) == {0: 1, 2: 1}
    (folder / "fail-1").unlink()
    again = pipe.resume(sqlite_broker)
    assert again.run_id == first.run_id and again.status == "succeeded"
    assert again.tasks["square"].value == [0, 1, 4] and again.tasks["total"].value == 5
    assert ran(folder) == {0: 1, 1: 1, 2: 1}  # kept instances did not run again
    assert again.tasks["square[0]"].kept and not again.tasks["square[1]"].kept


def test_a_changed_function_runs_again_with_everything_after_it(
        sqlite_broker: sbroker.Broker, tmp_path: Path) -> None:
    folder = tmp_path / "flow"
    pipe = load_flow(folder)
    (folder / "fail-2").touch()
    first = pipe.run(sqlite_broker)
    assert first.status == "failed"
    (folder / "fail-2").unlink()
    edited = load_flow(folder, FLOW.replace("return sum(square)", "return sum(square) * 10"))
    again = edited.resume(sqlite_broker, first.run_id)
    assert again.status == "succeeded" and again.tasks["total"].value == 50
    assert again.tasks["numbers"].kept and again.tasks["square[0]"].kept
    assert ran(folder) == {0: 1, 1: 1, 2: 1}


def test_a_new_list_on_a_rerun_of_its_maker_runs_every_item_again(
        sqlite_broker: sbroker.Broker, tmp_path: Path) -> None:
    folder = tmp_path / "flow"
    pipe = load_flow(folder)
    (folder / "fail-1").touch()
    first = pipe.run(sqlite_broker, params={"count": 2})
    assert first.status == "failed" and ran(folder) == {0: 1}
    (folder / "fail-1").unlink()
    again = pipe.resume(sqlite_broker, params={"count": 3})  # numbers changed: runs again
    assert again.status == "succeeded" and again.tasks["square"].value == [0, 1, 4]
    assert not again.tasks["square[0]"].kept
    assert ran(folder) == {0: 2, 1: 1, 2: 1}


def test_a_toml_file_maps_and_passes_values_by_parameter_name(
        sqlite_broker: sbroker.Broker, tmp_path: Path) -> None:
    (tmp_path / "toml_steps.py").write_text(textwrap.dedent('''
        def days(spark):
            return ["a", "bb", "ccc"]

        def size(spark, item, scale):
            return len(item) * scale

        def total(spark, size, days):
            return {"n": len(days), "sum": sum(size)}
    '''))
    sys.path.insert(0, str(tmp_path))
    text = '''
[pipeline]
name = "t"

[[task]]
name = "days"
python = "toml_steps:days"

[[task]]
name = "size"
map = "days"
python = "toml_steps:size"
args = { scale = 2 }

[[task]]
name = "total"
after = ["size"]
python = "toml_steps:total"
'''
    state = start_run(sqlite_broker, bind_inputs(parse_pipeline(text)))
    assert state.status == "succeeded", {n: t.error for n, t in state.tasks.items()}
    assert state.tasks["size"].value == [2, 4, 6]
    assert state.tasks["total"].value == {"n": 3, "sum": 12}


def test_each_instance_has_its_own_timeout_and_retries(sqlite_broker: sbroker.Broker,
                                                      tmp_path: Path) -> None:
    release = threading.Event()
    pipe = sbroker.Pipeline("p", retries=1, retry_delay="10ms")

    @pipe.task()
    def items() -> list[int]:
        return [0, 1, 2]

    @pipe.task(map=items, timeout="200ms", retries=0)
    def each(item: int) -> int:
        if item == 1:
            release.wait(1.0)  # past its timeout: stopped, failed; the others go on
        return item

    try:
        state = pipe.run(sqlite_broker)
    finally:
        release.set()
    assert state.status == "failed"
    assert [state.tasks[f"each[{i}]"].status for i in range(3)] == [
        "succeeded", "failed", "succeeded"]
    assert state.tasks["each[1]"].error is not None
    assert state.tasks["each[1]"].error.startswith("timed out after 0.2 s")
    assert state.tasks["each"].error == ("1 of 3 instances did not succeed (first each[1]: "
                                         f"{state.tasks['each[1]'].error})")
    assert attempts(sqlite_broker, state.run_id)["each[1]"] == 1


def test_from_a_task_runs_it_and_every_item_after_it_again(sqlite_broker: sbroker.Broker,
                                                          tmp_path: Path) -> None:
    folder = tmp_path / "flow"
    pipe = load_flow(folder)
    first = pipe.run(sqlite_broker)
    assert first.status == "succeeded" and ran(folder) == {0: 1, 1: 1, 2: 1}
    again = resume_run(sqlite_broker, pipe.definition(), first.run_id, rerun_from="square")
    assert again.status == "succeeded"
    assert again.tasks["numbers"].kept and not again.tasks["square[2]"].kept
    assert ran(folder) == {0: 2, 1: 2, 2: 2}
    tries = attempts(sqlite_broker, first.run_id)
    assert (tries["numbers"], tries["square[0]"], tries["total"]) == (1, 2, 2)


def test_a_submitted_python_run_is_driven_by_a_server(sqlite_broker: sbroker.Broker,
                                                     tmp_path: Path) -> None:
    folder = tmp_path / "flow"
    pipe = load_flow(folder)
    run_id = submit_run(sqlite_broker, pipe.definition({"count": 4}))
    server = PipelineService(sqlite_broker)  # loads the pipeline by its recorded source
    server.start()
    try:
        assert wait_run(sqlite_broker, run_id, 30) == "succeeded"
    finally:
        server.stop()
    run = get_run(sqlite_broker, run_id)
    assert run is not None
    assert {t["name"]: t["value"] for t in run["tasks"]}["total"] == 14
