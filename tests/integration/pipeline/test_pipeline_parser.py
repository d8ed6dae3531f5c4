"""Pipeline files: what parses, and errors that point at the right line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sbroker.apps.pipeline import PipelineError, load_pipeline, parse_pipeline
from sbroker.apps.spark import PythonTask, SparkConfig, SparkSQL

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "orders_pipeline.toml"

MINIMAL = """\
[pipeline]
name = "demo"

[params]
out = "out/demo"
rows = 10

[options]
concurrency = 2
spark.master = "local[1]"

[options.spark_conf]
"spark.sql.shuffle.partitions" = 3

[[stage]]
name = "load"

[[stage.task]]
name = "make"
python = "mod:make"
[stage.task.args]
path = "${out}/t"
rows = "${rows}"
label = "rows=${rows}"

[[stage.task]]
sql = \"\"\"
CREATE TABLE x AS SELECT 1
[[stage]]
\"\"\"

[[stage]]
name = "use"
[[stage.task]]
name = "count"
sql = "SELECT count(*) FROM parquet.`${out}/t` WHERE a > :min AND b = '$${literal}'"
args = { min = 3 }
"""


def test_a_full_file_becomes_frozen_dataclasses() -> None:
    pipeline = parse_pipeline(MINIMAL, path="demo.toml")
    assert pipeline.name == "demo"
    assert pipeline.options.concurrency == 2
    assert pipeline.options.spark == SparkConfig(
        master="local[1]", conf={"spark.sql.shuffle.partitions": "3"})
    assert [s.name for s in pipeline.stages] == ["load", "use"]
    make, second = pipeline.stages[0].tasks
    assert make.task == PythonTask("mod:make", path="out/demo/t", rows=10, label="rows=10")
    assert (make.line, second.name, second.line) == (18, "task2", 26)
    assert isinstance(second.task, SparkSQL) and "[[stage]]" in second.task.sql
    count = pipeline.stages[1].tasks[0]
    assert count.task == SparkSQL(
        "SELECT count(*) FROM parquet.`out/demo/t` WHERE a > :min AND b = '${literal}'",
        {"min": 3})
    assert pipeline.stages[1].line == 32
    assert pipeline.task_count == 3
    with pytest.raises(AttributeError):
        pipeline.name = "other"  # type: ignore[misc]


def test_params_are_overridden_with_the_type_of_their_default() -> None:
    pipeline = parse_pipeline(MINIMAL, params={"rows": "25", "out": "/data"})
    assert pipeline.stages[0].tasks[0].task.kwargs == {  # type: ignore[union-attr]
        "path": "/data/t", "rows": 25, "label": "rows=25"}
    with pytest.raises(PipelineError, match="'rows' must be an integer, got 'many'"):
        parse_pipeline(MINIMAL, params={"rows": "many"})
    with pytest.raises(PipelineError, match=r"unknown parameter 'nope' \(the file declares: "
                                            r"out, rows\)"):
        parse_pipeline(MINIMAL, params={"nope": "1"})


@pytest.mark.parametrize(("default", "expected"), [
    ("1.5", "a number"), ("true", "true or false"), ("7", "an integer")])
def test_a_wrong_override_says_what_kind_of_value_it_needs(default: str, expected: str) -> None:
    text = MINIMAL.replace("rows = 10\n", f"rows = 10\nx = {default}\n")
    with pytest.raises(PipelineError, match=f"'x' must be {expected}, got 'oops'"):
        parse_pipeline(text, params={"x": "oops"})


def test_defaults_name_the_pipeline_after_its_file(tmp_path: Path) -> None:
    path = tmp_path / "nightly.toml"
    path.write_text('[[stage]]\n[[stage.task]]\nsql = "SELECT 1"\n')
    pipeline = load_pipeline(path)
    assert pipeline.name == "nightly"
    assert pipeline.stages[0].name == "stage1"
    assert pipeline.options.concurrency is None
    assert pipeline.options.spark == SparkConfig()
    assert pipeline.base_dir == tmp_path


def test_the_shipped_example_parses() -> None:
    pipeline = load_pipeline(EXAMPLE)
    tasks = {t.name: t for t in pipeline.dag}
    assert len(tasks) == 10 and not pipeline.stages
    assert [n for n, t in tasks.items() if not t.after] == ["customers", "products", "orders"]
    assert tasks["daily_revenue"].after == ("orders",)  # not every generated table
    assert all(t.retry.retries == 2 for t in tasks.values())
    orders = tasks["orders"].task
    assert isinstance(orders, PythonTask) and orders.kwargs["orders"] == 1_000_000
    small = load_pipeline(EXAMPLE, {"out": "/tmp/x", "orders": "1000"})
    assert small.dag[2].task.kwargs["orders"] == 1000  # type: ignore[union-attr]


TASKS = '[[stage]]\nname = "s"\n[[stage.task]]\nname = "t"\n'

BAD = [
    ("[pipeline\nname = 'x'\n", 1, "invalid TOML"),
    ('[pipeline]\nname = "x"\ncolour = "red"\n', 3, "unknown key 'colour'"),
    ("verbose = true\n" + TASKS + 'sql = "x"\n', 1, "unknown key 'verbose'"),
    (TASKS + 'sql = "x"\nretry = 3\n', 6, "unknown key 'retry' in [stage.task]"),
    (TASKS + 'sql = "x"\npython = "m:f"\n', 6, "exactly one of 'sql' or 'python', not both"),
    (TASKS + 'args = {a = 1}\n', 3, "exactly one of 'sql' or 'python'"),
    (TASKS + 'python = "not a target"\n', 5, "task 't' of stage 's': PythonTask target"),
    (TASKS + 'python = "m:f"\nargs = [1, 2]\n', 6, "'args' of a python task must be a table"),
    (TASKS + 'python = "m:f"\n[stage.task.args]\nwhen = 2024-01-01\n', 6, "JSON-serialisable"),
    (TASKS + 'sql = "x"\n[[stage.task]]\nname = "t"\nsql = "y"\n', 7, "duplicate task name"),
    (TASKS + 'sql = "x"\n' + TASKS + 'sql = "y"\n', 7, "duplicate stage name 's'"),
    ('[[stage]]\nname = "empty"\n', 1, "stage 'empty' has no tasks"),
    ('[pipeline]\nname = "x"\n', None, "at least one [[stage]]"),
    (TASKS + 'sql = "SELECT ${missing}"\n', 5, "undefined parameter ${missing}"),
    ("[options]\nconcurrency = 0\n" + TASKS + 'sql = "x"\n', 2, "positive integer"),
    ('[options]\nspark.master = "local"\nspark.remote = "sc://h:1"\n' + TASKS + 'sql = "x"\n',
     3, "not both"),
    ('[options.spark]\nremote = "http://h"\n' + TASKS + 'sql = "x"\n', 2, "sc://"),
    ('[options.spark_conf]\n"spark.a" = [1]\n' + TASKS + 'sql = "x"\n', 2, "spark_conf value"),
    ('[pipeline]\nname = ""\n' + TASKS + 'sql = "x"\n', 2, "'name' must be a non-empty"),
    ('[params]\n"bad name" = 1\n' + TASKS + 'sql = "x"\n', 2, "parameter 'bad name'"),
]


@pytest.mark.parametrize(("text", "line", "message"), BAD)
def test_a_bad_file_is_one_line_naming_the_line(text: str, line: int | None,
                                                message: str) -> None:
    with pytest.raises(PipelineError) as caught:
        parse_pipeline(text, path="p.toml")
    error = caught.value
    assert message in error.message
    assert error.line == line
    assert "\n" not in str(error)
    assert str(error).startswith(f"p.toml:{line}:" if line else "p.toml: ")


def test_a_syntax_error_names_line_and_column() -> None:
    with pytest.raises(PipelineError) as caught:
        parse_pipeline('[[stage]]\nname = "s"\nx = = 1\n', path="p.toml")
    assert (caught.value.line, caught.value.col) == (3, 5)
    assert str(caught.value).startswith("p.toml:3:5: invalid TOML")


def test_an_unreadable_file_is_a_pipeline_error(tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match="cannot read"):
        load_pipeline(tmp_path / "missing.toml")


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=4),
       data=st.data())
def test_the_line_of_a_bad_task_is_found_in_any_layout(shape: list[int],
                                                      data: st.DataObject) -> None:
    bad_stage = data.draw(st.integers(0, len(shape) - 1))
    bad_task = data.draw(st.integers(0, shape[bad_stage] - 1))
    lines = ["[pipeline]", 'name = "gen"', ""]
    expected = 0
    for i, count in enumerate(shape):
        lines += ["[[stage]]", f'name = "s{i}"']
        for j in range(count):
            lines += ["", "[[stage.task]]", f'name = "t{j}"',
                      'sql = """', "SELECT 1", "[[stage.task]]", '"""']
            if (i, j) == (bad_stage, bad_task):
                lines.append('python = "m:f"')
                expected = len(lines)
    with pytest.raises(PipelineError) as caught:
        parse_pipeline("\n".join(lines) + "\n")
    assert caught.value.line == expected
    assert f"task 't{bad_task}' of stage 's{bad_stage}'" in caught.value.message
