"""One SparkSession per test run, created only when a ``spark``-marked test asks for it.

Settings match the runner's defaults for tests: local[2], UI off, 2 shuffle partitions, FAIR.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Python task targets of these tests (spark_task_helpers) import from this folder
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The shared local[2] session (built with the runner's own defaults)."""
    from sbroker.spark import SparkConfig, create_session

    session = create_session(SparkConfig(master="local[2]", app_name="sbroker-tests"))
    yield session
    session.stop()
