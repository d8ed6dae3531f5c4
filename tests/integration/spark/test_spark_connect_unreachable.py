"""An unreachable Spark Connect server: the run fails in bounded time with one line that
names the address, every task of the run fails, and closing never hangs. No JVM and no
server: the address is a closed loopback port."""

from __future__ import annotations

import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from sbroker.apps.spark import SparkConfig, SparkRunner, SparkSQL, execute
from sbroker.apps.spark.session import SparkUnavailable


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nothing listens once it is closed


def test_the_connect_timeout_defaults_to_30_seconds_and_is_configurable() -> None:
    assert SparkConfig(remote="sc://h:15002").connect_timeout == 30.0
    assert SparkConfig(remote="sc://h:15002", connect_timeout=5).connect_timeout == 5.0
    with pytest.raises(ValueError, match="connect_timeout"):
        SparkConfig(remote="sc://h:15002", connect_timeout=0)


def test_a_task_on_an_unreachable_connect_server_fails_with_one_line_naming_it() -> None:
    url = f"sc://127.0.0.1:{_closed_port()}"
    runner = SparkRunner(SparkConfig(remote=url, connect_timeout=0.3))
    try:
        execution = execute(runner, SparkSQL("SELECT 1"), log_id=1)
    finally:
        runner.close()
    assert execution.status == "failed"
    error = execution.error or ""
    assert url in error and "\n" not in error
    assert "check" in error and "0.3 s" in error


def test_every_task_waiting_for_the_session_fails_with_the_same_error() -> None:
    release = threading.Event()
    calls: list[int] = []

    def unreachable(config: SparkConfig) -> Any:
        calls.append(1)
        release.wait(30)
        raise SparkUnavailable("cannot reach the Spark Connect server at sc://x:1")

    runner = SparkRunner(SparkConfig(remote="sc://x:1"), session_factory=unreachable)
    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(execute, runner, SparkSQL(f"SELECT {i}"), log_id=i)
                   for i in range(3)]
        release.set()
        executions = [f.result(timeout=60) for f in futures]
    assert [e.status for e in executions] == ["failed"] * 3
    assert all("sc://x:1" in (e.error or "") for e in executions)
    assert len(calls) == 1  # the tasks behind the first did not each wait again


class _StuckSession:
    """A Connect session whose stop() never returns (its server is gone)."""

    def __init__(self) -> None:
        self.stop_called = threading.Event()

    def stop(self) -> None:
        self.stop_called.set()
        threading.Event().wait()


def test_closing_a_runner_whose_session_cannot_stop_returns() -> None:
    stuck = _StuckSession()
    runner = SparkRunner(SparkConfig(remote="sc://x:1"), session=stuck,  # type: ignore[arg-type]
                         stop_on_close=True, close_timeout=0.2)
    runner.close()  # returns: Ctrl-C always exits
    assert stuck.stop_called.is_set()


def test_cancelling_the_tasks_that_wait_for_an_unreachable_server_ends_the_wait() -> None:
    url = f"sc://127.0.0.1:{_closed_port()}"
    runner = SparkRunner(SparkConfig(remote=url, connect_timeout=600))
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(execute, runner, SparkSQL("SELECT 1"), log_id=7)
        tick, waited = threading.Event(), 0
        while not runner.cancel(7):  # True once the task runs (it waits for the server)
            waited += 1
            assert waited < 6000, "the task never started"
            tick.wait(0.01)
        execution = future.result(timeout=60)  # not 600 s
    runner.close()
    assert execution.status == "cancelled"
