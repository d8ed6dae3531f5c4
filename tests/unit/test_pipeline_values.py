"""What an attempt is sent with (the values of the tasks before it), a mapped task's
instances, and what "changed" means on a resume (docs/pipelines.md)."""

from __future__ import annotations

from typing import Any

import pytest

import sbroker
from sbroker.apps.pipeline import parse_pipeline
from sbroker.apps.pipeline.model import PIPELINE_KEY, TaskSpec
from sbroker.apps.pipeline.values import (
    attempt_task,
    definition,
    expand,
    instance_name,
    mapped_of,
)
from sbroker.apps.spark.tasks import PythonTask, SparkSQL


def shop(body: str = "len(item)") -> sbroker.Pipeline:
    pipe = sbroker.Pipeline("shop")

    @pipe.task()
    def days(spark: Any, month: str = "2026-11") -> list[str]:
        return [f"{month}-{d:02d}" for d in range(1, 4)]

    namespace: dict[str, Any] = {"pipe": pipe, "days": days}
    exec(f"@pipe.task(map=days)\ndef load(spark, item, days, scheduled_date):\n"
         f"    return {body}\n", namespace)

    @pipe.task(after=["load"])
    def total(spark: Any, load: list[int]) -> int:
        return sum(load)

    return pipe


def test_an_attempt_gets_the_values_of_the_tasks_before_it() -> None:
    days, load, total = shop().definition().dag
    task = attempt_task(total, {"load": [1, 2], "days": ["x"]}, {})
    assert isinstance(task, PythonTask) and task.kwargs["load"] == [1, 2]
    assert attempt_task(days, {}, {}) is days.task  # it takes none


def test_a_mapped_task_runs_once_per_item_named_task_i() -> None:
    _, load, _ = shop().definition().dag
    instances = expand(load, ["a", "bb"])
    assert not isinstance(instances, str)
    assert [i.name for i in instances] == ["load[0]", "load[1]"]
    assert [(i.map, i.inputs, i.after) for i in instances] == [
        (None, ("days", "scheduled_date"), ("days",))] * 2
    assert [i.task.kwargs["item"] for i in instances] == ["a", "bb"]  # type: ignore[union-attr]
    sent = attempt_task(instances[1], {"days": ["a", "bb"]},
                        {"scheduled_date": "2026-11-01"})
    assert isinstance(sent, PythonTask)
    assert {k: v for k, v in sent.kwargs.items() if not k.startswith("@")} == {
        "item": "bb", "days": ["a", "bb"], "scheduled_date": "2026-11-01"}
    assert expand(load, []) == ()
    assert (instance_name("load", 3), mapped_of("load[3]"), mapped_of("load")) == (
        "load[3]", ("load", 3), None)


@pytest.mark.parametrize(("value", "kind"), [({"a": 1}, "dict"), ("abc", "str"),
                                             (None, "null"), (3, "int")])
def test_a_mapped_task_over_what_is_not_a_list_fails_saying_so(value: object,
                                                               kind: str) -> None:
    _, load, _ = shop().definition().dag
    assert expand(load, value) == (f"task 'load' maps over 'days', whose value is {kind}, "
                                   "not a list")


def test_a_mapped_sql_task_binds_item() -> None:
    spec = TaskSpec("q", SparkSQL("SELECT :item AS x", {"n": 1}), map="days")
    instances = expand(spec, [7])
    assert not isinstance(instances, str)
    assert instances[0].task == SparkSQL("SELECT :item AS x", {"n": 1, "item": 7})


def test_a_changed_item_list_changes_each_instances_definition() -> None:
    _, load, _ = shop().definition().dag
    before, after = expand(load, ["a", "b"]), expand(load, ["a", "c"])
    assert not isinstance(before, str) and not isinstance(after, str)
    assert definition(before[0]) == definition(after[0])
    assert definition(before[1]) != definition(after[1])


def test_what_changed_means_for_a_python_function() -> None:
    base = [definition(s) for s in shop().definition().dag]
    assert [definition(s) for s in shop().definition().dag] == base  # same source
    edited = [definition(s) for s in shop("len(item) * 2").definition().dag]
    assert edited[0] == base[0] and edited[1] != base[1] and edited[2] == base[2]
    month = [definition(s) for s in shop().definition({"month": "2027-01"}).dag]
    assert month[0] != base[0] and month[1:] == base[1:]  # its argument changed


def test_where_the_pipeline_file_is_does_not_change_a_task() -> None:
    spec = shop().definition().dag[0]
    assert isinstance(spec.task, PythonTask)
    moved = PythonTask(spec.task.target, **{**spec.task.kwargs, PIPELINE_KEY: "elsewhere:p"})
    assert definition(spec) == definition(TaskSpec(spec.name, moved, code=spec.code))


def test_a_toml_task_keeps_the_definition_it_had_without_map_or_inputs() -> None:
    """Runs recorded before mapped tasks existed resume without running everything again:
    these are the digests those runs recorded."""
    text = ('[pipeline]\nname = "t"\n[[task]]\nname = "a"\nsql = "SELECT 1"\n'
            '[[task]]\nname = "b"\npython = "m:f"\nargs = { x = 1 }\n'
            '[[task]]\nname = "c"\nmap = "a"\nsql = "SELECT 1"\n')
    a, b, c = parse_pipeline(text).dag
    assert (definition(a), definition(b)) == ("8b019a4bc9ae3fe7b2e05ee5b6d16f9d",
                                              "60cbd2c5a7926762230d7f52de91b8d2")
    assert definition(c) != definition(a)
