"""A broker with the executor installed on a StubRunner, served by reader threads."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import sbroker
from sbroker.apps.scheduler import serve
from sbroker.apps.scheduler.executor import executor_state
from sbroker.apps.spark import StubRunner


class Readers:
    """Executor reader threads (what activation starts), stoppable from the test."""

    def __init__(self, broker: sbroker.Broker, count: int) -> None:
        self.broker = broker
        self.stop = threading.Event()
        self.state = executor_state(broker)
        self.state.count_reader(+1)  # readers from now until close(), even between serve()s
        self.threads = [threading.Thread(target=self._loop, name=f"reader-{i}", daemon=True)
                        for i in range(count)]
        for t in self.threads:
            t.start()

    def _loop(self) -> None:
        state = executor_state(self.broker)
        name = threading.current_thread().name
        while not self.stop.is_set():  # as the activated procedure does, but never exits
            serve(self.broker, state, name, wait=0.05, stopping=self.stop)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()
        self.state.count_reader(-1)


@pytest.fixture
def runner() -> StubRunner:
    return StubRunner()


@pytest.fixture
def executor(tmp_path: Path, runner: StubRunner) -> Iterator[sbroker.Broker]:
    b = sbroker.Broker.open(tmp_path / "sched.db")
    b.install_executor(max_queue_readers=2, runner=runner)
    yield b
    b.close()


@pytest.fixture
def readers(executor: sbroker.Broker) -> Iterator[Readers]:
    r = Readers(executor, 2)
    yield r
    r.close()


@pytest.fixture
def make_readers() -> type[Readers]:
    return Readers
