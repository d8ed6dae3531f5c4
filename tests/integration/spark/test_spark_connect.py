"""SparkRunner against a local Spark Connect server (a separate JVM started for this module)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start ``spark-submit --class SparkConnectServer`` on a free port; stop it after."""
    import pyspark

    port = _free_port()
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    log = (tmp_path_factory.mktemp("connect") / "server.log").open("wb")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    server = subprocess.Popen(
        [str(submit), "--class", SERVER_CLASS, "--master", "local[2]",
         "--driver-memory", "512m",
         "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
         "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
         "spark-internal"], stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        tick = threading.Event()
        deadline = time.monotonic() + 240
        while not _listening(port):  # the server says nothing else when it is ready
            assert server.poll() is None, "the Connect server exited"
            assert time.monotonic() < deadline, "the Connect server did not start"
            tick.wait(0.2)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def test_tasks_run_and_cancel_over_spark_connect(connect_url: str) -> None:
    # PySpark refuses a Connect session next to this run's classic one: check in a child
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    child = subprocess.run([sys.executable, str(Path(__file__).parent / "connect_check.py"),
                            connect_url], capture_output=True, text=True, env=env, timeout=600)
    assert child.returncode == 0, child.stderr[-3000:]
    seen = json.loads(child.stdout.strip().splitlines()[-1])
    assert seen == {
        "sql_value": {"rows": 1, "data": [[42]]},
        "sql_job_ids": [],  # Connect does not expose job ids
        "sql_operation_ids": True,  # but its operation ids (UUIDs) are recorded
        "python_value": 8,
        "tags_after": [],  # the task's tag was removed from the thread
        "progress_tasks": 2,  # the server's progress reports reached the runner
        "cancel_returned": True,
        "long_status": "cancelled",  # interruptTag stopped the query
    }


def test_the_sbroker_data_source_streams_over_spark_connect(connect_url: str,
                                                            tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    child = subprocess.run(
        [sys.executable, str(Path(__file__).parent / "stream_connect_check.py"), connect_url,
         str(tmp_path / "broker.db"), str(tmp_path / "checkpoint")],
        capture_output=True, text=True, env=env, timeout=600)
    assert child.returncode == 0, child.stderr[-3000:]
    assert json.loads(child.stdout.strip().splitlines()[-1]) == {
        "sent": 8, "last_batch": 3,  # five messages at two per batch: batches 1, 2, 3
        "snapshot": ["abc", "defgh"]}
