"""The shipped streaming example (examples/stream_pipeline.py), end to end on the shared
session with fewer orders."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "stream_pipeline.py"


def test_the_stream_pipeline_aggregates_writes_and_alerts(
        spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("stream_pipeline", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    sys.modules["stream_pipeline"] = example  # the activated procedure's module
    spec.loader.exec_module(example)
    seen = example.run(spark, tmp_path / "stream", orders=4_000, threshold=160,
                       bill_batch=1_500)
    assert seen["orders"] == 4_000  # every order counted once (the closing one stays open)
    assert seen["billed"] == [1_500, 1_500, 1_000]  # the scheduled job, in batches, stopped
    assert seen["billed_again"] == [] and seen["invoices"] == 4_000
    assert seen["rows"] > 10 * 10  # ten minutes, most products every minute
    assert seen["alerts"] == seen["expected"] > 0
    assert "ALERT P00" in capsys.readouterr().out
