"""Task types, their JSON message bodies, SparkConfig and results: no JVM."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sbroker.apps.spark import (
    PythonTask,
    SparkConfig,
    SparkSQL,
    TaskFailed,
    TaskResult,
    as_task,
    describe_task,
    json_value,
    one_line_error,
    task_from_json,
    task_to_json,
)
from sbroker.core.errors import BrokerError

json_scalars = st.none() | st.booleans() | st.integers() | st.text() | st.floats(
    allow_nan=False, allow_infinity=False)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(), inner, max_size=3), max_leaves=10)


def test_a_plain_string_is_spark_sql() -> None:
    assert as_task("SELECT 1") == SparkSQL("SELECT 1")
    assert task_from_json(task_to_json("SELECT 1")) == SparkSQL("SELECT 1")


@settings(max_examples=50, deadline=None)
@given(kwargs=st.dictionaries(st.sampled_from(["a", "rows", "out", "b_2", "seed"]),
                              json_values, max_size=4))
def test_python_task_round_trips_through_a_message_body(kwargs: dict[str, object]) -> None:
    task = PythonTask("pkg.mod:func", **kwargs)
    body = task_to_json(task)
    assert json.loads(body)["type"] == "python"
    assert task_from_json(body.encode()) == task


@pytest.mark.parametrize("args", [None, {"x": 1, "s": "a"}, [1, "two", None]])
def test_spark_sql_round_trips_with_named_or_positional_args(args: object) -> None:
    task = SparkSQL("SELECT * FROM t WHERE a = :x", args)  # type: ignore[arg-type]
    assert task_from_json(task_to_json(task)) == task


@pytest.mark.parametrize("body", [b"not json", b"[]", b'{"type": "shell", "cmd": "rm"}',
                                  b'{"type": "sql"}', b'{"v": 99, "type": "sql", "sql": "x"}',
                                  b'{"type": "python", "target": "no colon"}'])
def test_a_malformed_body_is_a_value_error(body: bytes) -> None:
    with pytest.raises(ValueError):
        task_from_json(body)


def test_task_arguments_must_be_json() -> None:
    with pytest.raises(TypeError, match="JSON"):
        PythonTask("m:f", when=dt.datetime.now())
    with pytest.raises(TypeError):
        SparkSQL("")
    with pytest.raises(ValueError, match="module:function"):
        PythonTask("just_a_module")


def test_describe_task_is_a_short_label() -> None:
    assert describe_task("SELECT\n  1") == "SELECT 1"
    assert describe_task(PythonTask("m:f", a=1)) == "m:f"
    assert len(describe_task("SELECT " + "x" * 200, width=20)) == 20


def test_spark_config_takes_master_or_remote() -> None:
    assert SparkConfig().master == "local[2]"
    remote = SparkConfig(remote="sc://localhost:15002")
    assert remote.master is None and remote.is_connect
    with pytest.raises(ValueError, match="not both"):
        SparkConfig(master="local[1]", remote="sc://x:1")
    with pytest.raises(ValueError, match="sc://"):
        SparkConfig(remote="http://x")


def test_spark_config_user_conf_overrides_defaults() -> None:
    config = SparkConfig(conf={"spark.sql.shuffle.partitions": 8, "spark.x": True})
    conf = config.effective_conf()
    assert conf["spark.sql.shuffle.partitions"] == "8"
    assert conf["spark.x"] == "true"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.scheduler.mode"] == "FAIR"
    assert config == SparkConfig(conf={"spark.sql.shuffle.partitions": "8", "spark.x": "true"})
    assert hash(config) == hash(SparkConfig(conf=dict(config.conf)))


def test_json_value_keeps_small_json_and_drops_the_rest() -> None:
    assert json_value({"n": Decimal("1.5"), "d": dt.date(2024, 1, 2)}) == {
        "n": 1.5, "d": "2024-01-02"}
    assert json_value((1, float("nan"))) == [1, None]
    assert json_value(object()) is None
    assert json_value("x" * 100, limit=10) is None


def test_one_line_error_keeps_the_first_line() -> None:
    error = ValueError("[SOME_CLASS] what went wrong\nSQLSTATE: 42000\n  context")
    assert one_line_error(error) == "ValueError: [SOME_CLASS] what went wrong"
    assert one_line_error(AssertionError()) == "AssertionError"
    assert len(one_line_error(ValueError("y" * 1000), limit=50)) == 50


def test_task_failed_carries_every_result() -> None:
    results = [TaskResult(1, "succeeded"), TaskResult(2, "failed", "ValueError: x"),
               TaskResult(3, "cancelled", "cancelled")]
    error = TaskFailed(results)
    assert isinstance(error, BrokerError)
    assert error.results == results
    assert [r.log_id for r in error.failed] == [2, 3]
    assert "2 of 3" in str(error) and "ValueError: x" in str(error)
