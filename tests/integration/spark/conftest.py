"""One SparkSession per test run, created only when a ``spark``-marked test asks for it.

Settings match the runner's defaults for tests: local[2], UI off, 2 shuffle partitions, FAIR.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Python task targets of these tests (spark_task_helpers) import from this folder
sys.path.insert(0, str(Path(__file__).parent))

# pyspark.testing imports pyspark.pandas, which warns (UserWarning) unless this is set before
# the first Spark context starts; setting it is what that warning asks for.
os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")

# PySpark's collect()/take() leave the result socket to the garbage collector
# (pyspark.util._load_from_socket), which raises ResourceWarning: an upstream leak that the
# tests cannot avoid. It is ignored for tests that run real Spark only, so sbroker's own
# sockets stay checked everywhere else.
_PYSPARK_SOCKET_LEAK = "ignore:unclosed <socket.socket:ResourceWarning"
SESSION_GROUP = "spark-session"


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups, however pytest was started
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Add the narrow ResourceWarning filter to ``spark``-marked tests; put every test of
    the shared session in one xdist group, so that a parallel run (``-n 2 --dist
    loadgroup``) starts that session (a JVM) in one worker only."""
    for item in items:
        if item.get_closest_marker("spark") is not None:
            item.add_marker(pytest.mark.filterwarnings(_PYSPARK_SOCKET_LEAK))
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(SESSION_GROUP))


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The shared local[2] session (built with the runner's own defaults)."""
    from sbroker.apps.spark import SparkConfig, create_session

    session = create_session(SparkConfig(master="local[2]", app_name="sbroker-tests"))
    yield session
    session.stop()
