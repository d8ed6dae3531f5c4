"""Pipelines written in Python (docs/pipelines.md): ``sbroker.Pipeline`` and ``@pipe.task``
build the model a TOML file builds; every bad definition is one line naming the function's
file and line."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

import sbroker
from sbroker.apps.pipeline.model import CALL_TARGET, PIPELINE_KEY, TASK_KEY, Retry, Schedule
from sbroker.apps.pipeline.python import code_digest, registered
from sbroker.apps.spark.tasks import PythonTask

HERE = __file__


def next_line() -> int:
    """The number of the line after the caller's."""
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno + 1


def raises_at(line: int, match: str) -> Any:
    """``pytest.raises`` of a PipelineError whose text starts ``this file:line: ``."""
    return pytest.raises(sbroker.PipelineError, match=rf"^{HERE}:{line}: .*{match}")


def shop() -> sbroker.Pipeline:
    pipe = sbroker.Pipeline("shop", concurrency=4, retries=1, retry_delay="1s")

    @pipe.task()
    def days(spark: Any, month: str = "2026-11") -> list[str]:
        return [f"{month}-{d:02d}" for d in range(1, 4)]

    @pipe.task(map=days, timeout="10m")
    def load(spark: Any, item: str) -> int:
        return len(item)

    @pipe.task(after=[load])
    def total(spark: Any, load: list[int], days: list[str]) -> int:
        return sum(load) + len(days)

    return pipe


def test_the_shop_example_builds_the_model_a_toml_file_builds() -> None:
    model = shop().definition()
    days, load, total = model.dag
    assert model.name == "shop" and model.stages == () and model.params == {"month": "2026-11"}
    assert [t.name for t in model.dag] == ["days", "load", "total"]
    assert (days.after, load.after, total.after) == ((), ("days",), ("load",))
    assert (days.map, load.map, total.map) == (None, "days", None)
    assert (days.inputs, load.inputs, total.inputs) == ((), ("item",), ("load", "days"))
    assert load.timeout == 600.0 and days.timeout is None
    assert days.retry == Retry(1, 1.0, 2.0, 600.0) and model.options.concurrency == 4
    assert isinstance(days.task, PythonTask) and days.task.target == CALL_TARGET
    assert days.task.kwargs == {PIPELINE_KEY: model.source, TASK_KEY: "days",
                                "month": "2026-11"}
    assert load.task.kwargs == {PIPELINE_KEY: model.source, TASK_KEY: "load"}
    assert model.path is not None and str(model.path) == HERE


def test_a_decorated_function_is_still_the_function() -> None:
    pipe = shop()
    assert pipe.tasks["days"](None, month="2027-01") == ["2027-01-01", "2027-01-02",
                                                         "2027-01-03"]
    assert pipe.tasks["total"].__name__ == "total"
    assert list(pipe.tasks) == ["days", "load", "total"]


def test_parameters_are_the_keyword_parameters_with_defaults_set_by_name() -> None:
    pipe = sbroker.Pipeline("p")

    @pipe.task()
    def a(spark: Any, rows: int = 10, ratio: float = 0.5, dry: bool = False,
          tags: list[str] | None = None) -> None: ...

    @pipe.task()
    def b(out: str = "out/p", rows: int = 10) -> None: ...

    assert pipe.definition().params == {"rows": 10, "ratio": 0.5, "dry": False,
                                        "tags": None, "out": "out/p"}
    text = pipe.definition({"rows": "7", "ratio": "2", "dry": "yes", "out": "/tmp/x"},
                           text=True)
    assert text.params == {"rows": 7, "ratio": 2.0, "dry": True, "tags": None,
                           "out": "/tmp/x"}
    assert text.dag[1].task.kwargs["rows"] == 7  # type: ignore[union-attr]
    typed = pipe.definition({"tags": ["x", "y"]})
    assert typed.dag[0].task.kwargs["tags"] == ["x", "y"]  # type: ignore[union-attr]
    with pytest.raises(sbroker.PipelineError, match=r"unknown parameter 'row' \(pipeline 'p' "
                                                    r"has: dry, out, ratio, rows, tags\)"):
        pipe.definition({"row": 1})
    with pytest.raises(sbroker.PipelineError, match="parameter 'rows' must be an integer"):
        pipe.definition({"rows": "many"}, text=True)


def test_the_runs_scheduled_time_is_a_parameter_every_pipeline_has() -> None:
    pipe = sbroker.Pipeline("daily", schedule=sbroker.Cron("0 2 * * *", timezone="Europe/Paris"))

    @pipe.task()
    def extract(spark: Any, scheduled_date: str, scheduled_for: str) -> None: ...

    model = pipe.definition()
    assert model.dag[0].inputs == ("scheduled_date", "scheduled_for")
    assert model.scheduled_for is None and model.params == {}
    given = pipe.definition({"scheduled_for": "2026-01-02"}, text=True)
    assert given.dag[0].inputs == ("scheduled_date", "scheduled_for")  # given at send time
    assert given.scheduled_for == "2026-01-02T00:00:00+01:00"
    with pytest.raises(sbroker.PipelineError, match="scheduled_date is its date"):
        pipe.definition({"scheduled_date": "2026-01-02"})


def test_values_come_from_tasks_before_directly_or_not_and_after_takes_names() -> None:
    pipe = sbroker.Pipeline("p")

    @pipe.task(after="b")  # a task defined further down, by name
    def a(spark: Any, b: int, c: int) -> int:
        return b + c

    @pipe.task(after=["c"])
    def b(c: int) -> int:
        return c

    @pipe.task
    def c() -> int:
        return 1

    model = pipe.definition()
    assert [(t.name, t.after, t.inputs) for t in model.dag] == [
        ("a", ("b",), ("b", "c")), ("b", ("c",), ("c",)), ("c", (), ())]


def test_options_schedules_and_retry_overrides() -> None:
    spark = sbroker.SparkConfig(master="local[1]")
    pipe = sbroker.Pipeline("p", concurrency=None, retries=2, retry_delay=3,
                            retry_backoff=3.0, retry_max_delay="1m", timeout="2h",
                            lease="45s", schedule=sbroker.Cron("0 2 * * *",
                                                               timezone="Europe/Paris"),
                            spark=spark, description="nightly")

    @pipe.task(retries=0, retry_delay="250ms", timeout=30)
    def a() -> None: ...

    @pipe.task()
    def b() -> None: ...

    model = pipe.definition()
    assert model.schedule == Schedule(None, "0 2 * * *", "Europe/Paris", False, "skip")
    assert model.options.spark is spark and model.options.concurrency is None
    assert model.description == "nightly" and model.options.lease == pipe.lease == 45.0
    assert (model.dag[0].retry, model.dag[0].timeout) == (Retry(0, 0.25, 3.0, 60.0), 30.0)
    assert (model.dag[1].retry, model.dag[1].timeout) == (Retry(2, 3.0, 3.0, 60.0), 7200.0)
    every = sbroker.Every("15m", catchup=True, overlap="queue").schedule
    assert every == Schedule(900.0, None, "UTC", True, "queue")


def test_a_pipeline_is_found_again_by_its_source() -> None:
    pipe = shop()
    model = pipe.definition()
    assert model.source is not None and model.source.startswith("memory:shop:")
    assert registered(model.source) is pipe


# -- what "changed" means for a function on a resume -----------------------------------------
def define(body: str, decorator: str = "@pipe.task()", above: str = "") -> Callable[..., Any]:
    namespace: dict[str, Any] = {"pipe": sbroker.Pipeline("p")}
    exec(compile(f"{above}{decorator}\ndef f(spark):\n{body}\n", "<defs>", "exec"),
         namespace)
    return namespace["f"].function  # type: ignore[no-any-return]


def test_a_functions_digest_is_its_own_source() -> None:
    assert code_digest(shop().tasks["load"].function) == code_digest(
        shop().tasks["load"].function)
    assert code_digest(shop().tasks["load"].function) != code_digest(
        shop().tasks["total"].function)

    def f(spark: Any) -> int:
        return 1

    def g(spark: Any) -> int:
        return 1

    assert code_digest(f) != code_digest(g)  # its name is part of its source


def test_without_source_the_compiled_code_decides() -> None:
    base = code_digest(define("    return 1"))
    assert base == code_digest(define("    return 1"))
    assert base != code_digest(define("    return 2"))


# -- bad definitions: one line naming the function's file and line ----------------------------
def test_a_cycle() -> None:
    pipe = sbroker.Pipeline("p")
    line = next_line()
    @pipe.task(after="b")
    def a() -> None: ...

    @pipe.task(after="a")
    def b() -> None: ...

    with raises_at(line, r"the tasks' 'after' make a cycle: a -> b -> a$"):
        pipe.definition()


def test_an_unknown_name() -> None:
    pipe = sbroker.Pipeline("p")
    line = next_line()
    @pipe.task(after=["nope"])
    def a() -> None: ...

    with raises_at(line, r"task 'a' comes after 'nope', which is not a task of pipeline 'p'"):
        pipe.definition()
    pipe2 = sbroker.Pipeline("p2")
    line = next_line()
    @pipe2.task(map="nope")
    def b(item: int) -> None: ...

    with raises_at(line, r"task 'b' comes after 'nope'"):
        pipe2.definition()


def test_a_duplicate_name() -> None:
    pipe = sbroker.Pipeline("p")

    @pipe.task()
    def a() -> None: ...

    line = next_line() + 1
    with raises_at(line, rf"duplicate task name 'a' \(also {HERE}:\d+\)$"):
        @pipe.task(name="a")
        def other() -> None: ...


@pytest.mark.parametrize(("signature", "match"), [
    ("ctx", "takes a parameter 'ctx' that is neither 'spark', 'item' \\(mapped tasks\\), a "
            "task it comes after, nor has a default"),
    ("spark, item", "takes 'item', which only a mapped task gets"),
    ("spark, b", "takes a parameter 'b', named after a task it does not come after: add 'b' "
                 "to its 'after'"),
    ("spark, b=1", "named after a task it does not come after"),
    ("spark, *rest", "takes \\*rest: name each parameter"),
    ("spark, **more", "takes \\*\\*more: name each parameter"),
    ("spark, x, /", "parameter 'x' is positional-only"),
    ("spark, when=object()", "its default must be a JSON value, not object"),
])
def test_a_parameter_nothing_gives(signature: str, match: str) -> None:
    pipe = sbroker.Pipeline("p")
    namespace: dict[str, Any] = {"pipe": pipe}

    @pipe.task()
    def b() -> None: ...

    with pytest.raises(sbroker.PipelineError, match=rf"^<task>:1: .*{match}"):
        exec(compile(f"@pipe.task()\ndef a({signature}):\n    pass\n", "<task>", "exec"),
             namespace)
        pipe.definition()


def test_two_defaults_for_one_parameter() -> None:
    pipe = sbroker.Pipeline("p")

    @pipe.task()
    def a(out: str = "x") -> None: ...

    line = next_line()
    @pipe.task()
    def b(out: str = "y") -> None: ...

    with raises_at(line, r"parameter 'out' has the default 'y' here and 'x' in task 'a' "):
        pipe.definition()


@pytest.mark.parametrize(("options", "match"), [
    ({"retries": -1}, "'retries' must be an integer >= 0"),
    ({"retry_delay": "soon"}, "'retry_delay' must be a duration"),
    ({"timeout": 0}, "'timeout' must be a duration"),
    ({"after": [3]}, "'after' and 'map' take tasks or task names, not 3"),
    ({"name": "a[1]"}, "a task's name must be a non-empty string without"),
    ({"name": "item"}, "a task cannot be named 'item'"),
])
def test_bad_task_options(options: dict[str, Any], match: str) -> None:
    pipe = sbroker.Pipeline("p")
    line = next_line() + 1
    with raises_at(line, match):
        pipe.task(**options)(lambda: None)


def test_what_is_not_a_task() -> None:
    pipe = sbroker.Pipeline("p")
    other = sbroker.Pipeline("q")

    @other.task()
    def theirs() -> None: ...

    line = next_line() + 1
    with raises_at(line, "refers to <task 'theirs' of pipeline 'q'>, a task of another"):
        @pipe.task(after=[theirs])
        def mine() -> None: ...
    line = next_line() + 1
    with raises_at(line, "a task is a function"):
        pipe.task()(print)  # type: ignore[arg-type]
    line = next_line() + 1
    with raises_at(line, "task 'later' is async"):
        @pipe.task()
        async def later() -> None: ...


def test_a_pipeline_with_no_tasks_and_bad_options() -> None:
    line = next_line()
    pipe = sbroker.Pipeline("empty")
    with raises_at(line, "pipeline 'empty' has no tasks"):
        pipe.definition()
    line = next_line() + 1
    with raises_at(line, "'concurrency' must be a positive integer"):
        sbroker.Pipeline("p", concurrency=0)
    line = next_line() + 1
    with raises_at(line, "'lease' must be a duration"):
        sbroker.Pipeline("p", lease="forever")
    line = next_line() + 1
    with raises_at(line, "'schedule' must be sbroker.Every"):
        sbroker.Pipeline("p", schedule="15m")  # type: ignore[arg-type]
    line = next_line() + 1
    with raises_at(line, "'every' must be a duration"):
        sbroker.Every("often")
    line = next_line() + 1
    with raises_at(line, "'cron' must be a cron expression of five fields"):
        sbroker.Cron("0 2 * *")
    line = next_line() + 1
    with raises_at(line, "unknown timezone 'Mars/Olympus'"):
        sbroker.Cron("0 2 * * *", timezone="Mars/Olympus")
