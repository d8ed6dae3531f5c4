"""The clocks' sleep: real on the system clock, moved by ``advance`` on the fake one (the
stores' timing sleeps through a clock)."""

from __future__ import annotations

import threading

from sbroker.core.clock import FakeClock


def test_a_fake_clocks_sleep_returns_only_once_the_clock_has_moved_that_far() -> None:
    clock = FakeClock()
    start = clock.now()
    woke: list[float] = []
    done = threading.Event()

    def sleeper() -> None:
        clock.sleep(5)
        woke.append(clock.now())
        done.set()

    thread = threading.Thread(target=sleeper)
    thread.start()
    while not done.is_set():  # a step at a time, however late the sleeper starts
        clock.advance(1)
        done.wait(0.01)
    thread.join()
    assert woke[0] - start >= 5


def test_a_fake_clocks_sleep_of_nothing_returns_at_once() -> None:
    clock = FakeClock()
    clock.sleep(0)
    assert clock.now() == FakeClock().now()
