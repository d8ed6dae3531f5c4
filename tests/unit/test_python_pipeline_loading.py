"""Python pipelines found by name (``FILE.py:ATTR``, ``FILE.py``, ``module:attr``), their
tasks called as the executor calls them, the value contract (JSON, at most 64 KiB), and a
TOML file's ``map`` and values by parameter name (docs/pipelines.md)."""

from __future__ import annotations

import datetime as dt
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import sbroker
from sbroker.apps.pipeline import parse_pipeline
from sbroker.apps.pipeline.loading import (
    bind_inputs,
    call_task,
    check_value,
    find_pipeline,
    is_python_target,
    load_python_pipeline,
)
from sbroker.apps.pipeline.model import PIPELINE_KEY, TASK_KEY
from sbroker.apps.spark.tasks import PythonTask

pytestmark = pytest.mark.usefixtures("own_imports")

FLOW = '''
import sbroker

pipe = sbroker.Pipeline("flow", retries=1)

@pipe.task()
def numbers(spark, count=3):
    return list(range(count))

@pipe.task(map=numbers)
def square(item):
    return item * item

@pipe.task(after=[square])
def total(spark, square, numbers):
    return {"sum": sum(square), "n": len(numbers), "spark": spark}
'''




def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def test_a_file_with_its_attribute_or_its_only_pipeline(tmp_path: Path) -> None:
    path = write(tmp_path, "flow_a.py", FLOW)
    model = load_python_pipeline(f"{path}:pipe", {"count": "5"})
    assert model.name == "flow" and model.params == {"count": 5}
    assert model.source == f"{path.resolve()}:pipe"
    assert [t.name for t in model.dag] == ["numbers", "square", "total"]
    assert find_pipeline(str(path)) is find_pipeline(f"{path}:pipe")  # imported once


def test_a_module_and_attribute_from_the_current_folder(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    write(tmp_path / "jobs_b", "__init__.py", "")
    write(tmp_path / "jobs_b", "flows.py", FLOW)
    monkeypatch.chdir(tmp_path)
    model = load_python_pipeline("jobs_b.flows:pipe")
    assert model.source == "jobs_b.flows:pipe" and model.params == {"count": 3}


def test_two_files_of_one_name_in_two_folders(tmp_path: Path) -> None:
    one = write(tmp_path / "one", "flow_c.py", FLOW)
    two = write(tmp_path / "two", "flow_c.py", FLOW.replace('"flow"', '"flow2"'))
    assert find_pipeline(f"{one}:pipe").name == "flow"
    assert find_pipeline(f"{two}:pipe").name == "flow2"
    assert find_pipeline(f"{one}:pipe").name == "flow"


@pytest.mark.parametrize(("text", "python"), [
    ("flow.py:pipe", True), ("flow.py", True), ("jobs.flows:pipe", True),
    ("orders.toml", False), ("dir/orders", False), ("orders", False)])
def test_what_names_a_python_pipeline(text: str, python: bool) -> None:
    assert is_python_target(text) is python


@pytest.mark.parametrize(("target", "text", "match"), [
    ("missing.py:pipe", None, r"missing\.py: no such file"),
    ("flow_d.py:nope", FLOW, r"flow_d\.py: flow_d has no attribute 'nope' \(sbroker.Pipeline"
                             r" objects here: pipe\)"),
    ("flow_d.py:sbroker", FLOW, r"flow_d\.py: sbroker is a module, not an sbroker.Pipeline"),
    ("flow_d.py", FLOW + "\nother = sbroker.Pipeline('o')\n",
     r"name the pipeline as .*flow_d\.py:ATTR \(sbroker.Pipeline objects here: other, pipe\)"),
    ("flow_d.py:pipe", "import sbroker\n\ndef broken(:\n", r"flow_d\.py:3: cannot import it: "
                                                          r"SyntaxError: invalid syntax"),
    ("flow_d.py:pipe", "import sbroker\nx = 1\nraise RuntimeError('no config')\n",
     r"flow_d\.py:3: cannot import it: RuntimeError: no config$"),
    ("flow_d.py:pipe", "import no_such_module_here\n",
     r"flow_d\.py:1: cannot import it: ModuleNotFoundError: No module named"),
    ("flow_d.py:pipe", FLOW + "\n@pipe.task(name='total')\ndef again():\n    pass\n",
     r"flow_d\.py:18: duplicate task name 'total'"),
])
def test_a_pipeline_that_cannot_be_found_is_one_line(tmp_path: Path, target: str,
                                                    text: str | None, match: str) -> None:
    if text is not None:
        write(tmp_path, "flow_d.py", text)
    with pytest.raises(sbroker.PipelineError, match=match) as caught:
        find_pipeline(str(tmp_path / target))
    assert "\n" not in str(caught.value)


def test_an_unknown_module_is_one_line(tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(sbroker.PipelineError, match=r"no module named 'nowhere_e' \(from the "
                                                    r"current folder or the installed"):
        find_pipeline("nowhere_e.flows:pipe")


# -- in the executor ----------------------------------------------------------------------------
def call(model: Any, name: str, spark: Any = "SPARK", **values: Any) -> Any:
    task = next(t for t in model.dag if t.name == name).task
    assert isinstance(task, PythonTask)
    return call_task(spark, **task.kwargs, **values)


def test_the_executor_calls_a_task_with_its_parameters_and_values(tmp_path: Path) -> None:
    model = load_python_pipeline(f"{write(tmp_path, 'flow_f.py', FLOW)}:pipe")
    assert call(model, "numbers") == [0, 1, 2]
    assert call(model, "square", item=4) == 16  # takes no spark: none is passed
    assert call(model, "total", square=[0, 1, 4], numbers=[0, 1, 2]) == {
        "sum": 5, "n": 3, "spark": "SPARK"}


def test_another_process_finds_a_file_pipeline_by_its_source(tmp_path: Path) -> None:
    path = write(tmp_path, "flow_g.py", FLOW)
    model = load_python_pipeline(f"{path}:pipe", {"count": "2"})
    sys.modules.pop("flow_g")  # as a fresh process would: not imported yet
    assert call(model, "numbers") == [0, 1]


def test_a_pipeline_defined_in_a_function_runs_in_its_own_process_only() -> None:
    pipe = sbroker.Pipeline("local")

    @pipe.task()
    def one() -> int:
        return 1

    kwargs = dict(pipe.definition().dag[0].task.kwargs)  # type: ignore[union-attr]
    assert call_task(None, **kwargs) == 1
    kwargs[PIPELINE_KEY] = kwargs[PIPELINE_KEY].replace("memory:local:", "memory:local:f")
    with pytest.raises(sbroker.PipelineError, match="pipeline 'local' was defined inside a "
                                                    "function: only the process"):
        call_task(None, **kwargs)
    kwargs = {PIPELINE_KEY: pipe.definition().source, TASK_KEY: "two"}
    with pytest.raises(LookupError, match="pipeline 'local' .* has no task 'two' now"):
        call_task(None, **kwargs)


class Frame:
    """Stands for a Spark DataFrame."""


@pytest.mark.parametrize(("value", "match"), [
    (Frame(), r"^task 't' returned a test_python_pipeline_loading\.Frame, which is not a "
              r"JSON value: return numbers, text, lists and dicts \(for data, write a table "
              r"and return its path\)$"),
    ({"day": dt.date(2026, 1, 1)}, r"returned a dict holding a datetime\.date, which is"),
    ([1, float("nan")], r"returned a list holding the float nan, which is not"),
    ({(1, 2): 3}, r"returned a dict holding a tuple, which"),
    ({1, 2}, r"returned a set, which"),
])
def test_a_value_that_is_not_json_fails_the_attempt_naming_task_and_type(
        value: object, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        check_value("t", value)


def test_values_are_json_and_at_most_64_kib() -> None:
    assert check_value("t", (1, "a", None, True, 2.5, {"k": [1]})) == [
        1, "a", None, True, 2.5, {"k": [1]}]
    assert check_value("t", {1: "one"}) == {"1": "one"}  # as JSON has it
    check_value("t", "x" * (64 * 1024 - 2))
    with pytest.raises(ValueError, match=r"^task 't' returned 65 KiB of JSON, over the 64 KiB "
                                         r"a value may have: write the data to a table and "
                                         r"return its path$"):
        check_value("t", "x" * (65 * 1024))


# -- TOML: map and values by parameter name ---------------------------------------------------
TOML = '''
[pipeline]
name = "t"

[[task]]
name = "days"
python = "toml_tasks_h:days"

[[task]]
name = "load"
map = "days"
python = "toml_tasks_h:load"
args = { scale = 2 }

[[task]]
name = "total"
after = ["load"]
python = "toml_tasks_h:total"
'''
TASKS = '''
def days(spark):
    return ["a", "bb"]

def load(session, item, scale, days, scheduled_date, flag=False):
    return len(item) * scale

def total(spark, load, extra=1):
    return sum(load)
'''


def test_a_toml_task_may_map_and_takes_values_by_parameter_name(tmp_path: Path) -> None:
    write(tmp_path, "toml_tasks_h.py", TASKS)
    sys.path.insert(0, str(tmp_path))
    model = bind_inputs(parse_pipeline(TOML, path="t.toml"))
    days, load, total = model.dag
    assert (load.map, load.after, total.map) == ("days", ("days",), None)
    assert (days.inputs, load.inputs, total.inputs) == (
        (), ("item", "days", "scheduled_date"), ("load",))


def test_a_toml_task_with_a_parameter_nothing_gives(tmp_path: Path) -> None:
    write(tmp_path, "toml_tasks_i.py", "def days(spark, month):\n    return []\n")
    sys.path.insert(0, str(tmp_path))
    text = '[pipeline]\nname = "t"\n\n[[task]]\nname = "days"\npython = "toml_tasks_i:days"\n'
    with pytest.raises(sbroker.PipelineError, match=r"^t\.toml:4: task 'days' takes a parameter "
                                                    r"'month' that is neither .* "
                                                    r"\(toml_tasks_i:days\)$"):
        bind_inputs(parse_pipeline(text, path="t.toml"))


@pytest.mark.parametrize(("lines", "match"), [
    ('map = "nope"', r"t\.toml:7: task 'b' comes after 'nope', which is not a task"),
    ('map = "a"\nafter = ["x"]', r"t\.toml:8: task 'b' comes after 'x', which is not a task"),
    ("map = 3", r"t\.toml:7: task 'b': 'map' must be the name of a task"),
    ('map = "b"', r"t\.toml:7: task 'b': a task cannot come after itself"),
    ('map = "a"\nargs = [1]', r"t\.toml:8: task 'b': a mapped SQL task binds its item as "
                             r":item: its 'args' must be a table"),
])
def test_bad_maps_in_toml(lines: str, match: str) -> None:
    text = ('[pipeline]\nname = "t"\n[[task]]\nname = "a"\nsql = "SELECT 1"\n[[task]]\n'
            f'{lines}\nname = "b"\nsql = "SELECT 2"\n')
    with pytest.raises(sbroker.PipelineError, match=match):
        parse_pipeline(text, path="t.toml")


def test_a_stage_task_cannot_map() -> None:
    text = ('[pipeline]\nname = "t"\n[[stage]]\nname = "s"\n[[stage.task]]\nname = "a"\n'
            'sql = "SELECT 1"\nmap = "x"\n')
    with pytest.raises(sbroker.PipelineError, match=r"t\.toml:8: unknown key 'map'"):
        parse_pipeline(text, path="t.toml")


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.spark  # the example's task module imports pyspark (no session is started)
def test_the_orders_example_in_python_is_the_toml_examples_graph() -> None:
    toml = parse_pipeline((EXAMPLES / "orders_pipeline.toml").read_text())
    python = load_python_pipeline(f"{EXAMPLES / 'orders_pipeline.py'}:pipe")
    assert {t.name: set(t.after) for t in python.dag} == {
        t.name: set(t.after) for t in toml.dag}
    assert python.options.spark == toml.options.spark
    assert (python.options.retry, python.options.concurrency) == (
        toml.options.retry, toml.options.concurrency)
    assert python.params == {"out": "out/orders", "order_count": 1_000_000,
                             "customer_count": 100_000, "product_count": 10_000,
                             "days": 730, "seed": 42}


def test_a_pipeline_imported_as_a_module_knows_where_it_is(tmp_path: Path) -> None:
    write(tmp_path, "flow_j.py", FLOW)
    sys.path.insert(0, str(tmp_path))
    import flow_j  # type: ignore[import-not-found]

    assert flow_j.pipe.definition().source == "flow_j:pipe"
