"""A close on the way out must not fail on a background thread whose start Ctrl-C cut short.

``Thread.start`` waits for the new thread to say it runs; a KeyboardInterrupt landing in that
wait (or between creating the thread and starting it) leaves its owner holding a thread that
``Thread.join`` refuses: "cannot join thread before it is started". ``sbroker run`` then exited
with that error instead of its Ctrl-C message."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sbroker import Broker
from sbroker.core import threads


def test_join_waits_for_a_running_thread_to_end() -> None:
    release, ended = threading.Event(), threading.Event()

    def work() -> None:
        release.wait()
        ended.set()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    threads.join(thread, 0.01)  # it is still waiting: join gives up after the timeout
    assert thread.is_alive()
    release.set()
    threads.join(thread)
    assert ended.is_set() and not thread.is_alive()


def test_join_passes_over_a_thread_that_never_started_itself_and_none() -> None:
    never = threading.Thread(target=lambda: None, daemon=True)
    with pytest.raises(RuntimeError, match="before it is started"):
        never.join(0)  # what the owners' close() used to run into
    threads.join(never, 10)
    threads.join(threading.current_thread())
    threads.join(None)


def _interrupt_start(monkeypatch: pytest.MonkeyPatch, name: str) -> list[str]:
    """Ctrl-C in the next ``start()`` of the thread called ``name``, before it runs."""
    cut: list[str] = []
    real = threading.Thread.start

    def start(self: threading.Thread) -> None:
        if self.name == name and not cut:
            cut.append(name)
            raise KeyboardInterrupt
        real(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    return cut


def test_a_broker_closes_after_ctrl_c_cut_a_waiting_receives_thread_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = Broker.open(tmp_path / "broker.db")
    b.create_queue("Q")
    cut = _interrupt_start(monkeypatch, "sbroker-changefeed")
    with pytest.raises(KeyboardInterrupt), b.transaction() as tx:
        tx.receive("Q", timeout=0.01)  # a waiting receive starts the change feed's poller
    assert cut == ["sbroker-changefeed"]
    b.close()  # raised RuntimeError("cannot join thread before it is started")
