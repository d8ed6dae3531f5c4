"""Waiting RECEIVE (timeout > 0 or None): it returns as soon as a commit makes a message
available, whether that commit comes from this process or another one on the same file.

Latencies are printed (``pytest -s``), not asserted: only "well within the timeout" is."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.helpers import (
    Background,
    Child,
    Holder,
    begin_and_send,
    bodies,
    make_pair,
    on_hook,
    send,
)

from sbroker import Broker, FakeClock

LONG = 60.0  # the RECEIVE timeout; a wake-up must come long before it



@pytest.fixture
def db_path(database: str) -> str:
    """The test's broker database, on each backend (tests/conftest.py's ``database``)."""
    return database


def _waiting_receive(b: Broker, timeout: float | None, **kw: object) -> Background:
    def run() -> tuple[list[str], float]:
        with b.transaction() as tx:
            got = tx.receive("TargetQueue", timeout=timeout, **kw)  # type: ignore[arg-type]
            return bodies(got), time.monotonic()
    return Background(run, "waiting-receive")


def _on_wait(b: Broker) -> threading.Event:
    return on_hook(b, "waiting", "TargetQueue")


@pytest.mark.parametrize("timeout", [LONG, None], ids=["timeout", "forever"])
def test_a_waiting_receive_returns_the_message_committed_by_another_thread(
    pair: Broker, timeout: float | None,
) -> None:
    handle = begin_and_send(pair)
    started = time.monotonic()
    waiter = _waiting_receive(pair, timeout)
    send(pair, handle, "wake up")
    committed = time.monotonic()
    got, returned = waiter.result()
    assert got == ["wake up"]
    assert returned - started < LONG / 2
    print(f"same-process wake-up latency: {1000 * (returned - committed):.1f} ms")


def test_a_waiting_receive_wakes_when_a_rollback_makes_messages_available_again(
    pair: Broker,
) -> None:
    begin_and_send(pair, "only")
    holder = Holder(pair, lambda tx: tx.receive("TargetQueue"))
    parked = _on_wait(pair)
    waiter = _waiting_receive(pair, LONG)
    assert parked.wait(LONG)
    assert not waiter.done.is_set()  # nothing available: the only group is locked
    holder.finish(commit=False)
    assert waiter.result()[0] == ["only"]


def test_get_conversation_group_waits_for_a_group_to_arrive(pair: Broker) -> None:
    handle = begin_and_send(pair)

    def wait_group() -> str | None:
        with pair.transaction() as tx:
            return tx.get_conversation_group("TargetQueue", timeout=LONG)

    waiter = Background(wait_group)
    send(pair, handle, "x")
    group = waiter.result()
    assert group is not None and pair.peek("TargetQueue")[0].conversation_group_id == group


def test_a_waiting_receive_in_this_process_wakes_on_a_commit_from_another_process(
    pair: Broker, db_path: Path, spawn: Callable[..., Child],
) -> None:
    handle = begin_and_send(pair)
    child = spawn("send-on", db_path, handle, "from another process")
    child.expect("ready")
    waiter = _waiting_receive(pair, LONG)
    child.tell("go")
    committed_at = child.expect("committed")
    got, returned = waiter.result()
    assert got == ["from another process"]
    assert returned - committed_at < LONG / 2
    print(f"cross-process wake-up latency: {1000 * (returned - committed_at):.1f} ms")
    assert child.finish() == 0


def test_a_waiting_receive_in_another_process_wakes_on_a_commit_here(
    pair: Broker, db_path: Path, spawn: Callable[..., Child],
) -> None:
    handle = begin_and_send(pair)
    child = spawn("wait-receive", db_path, "TargetQueue", LONG)
    child.expect("parked")
    send(pair, handle, "from the parent")
    committed = time.monotonic()
    out = child.expect("received")
    assert [r["body"] for r in out["rows"]] == ["from the parent"]
    assert out["at"] - committed < LONG / 2
    print(f"cross-process wake-up latency: {1000 * (out['at'] - committed):.1f} ms")
    assert child.finish() == 0


def test_a_waiting_receive_on_a_fake_clock_times_out_only_when_time_passes(
    db_path: Path,
) -> None:
    clock = FakeClock()
    with Broker.open(db_path, clock=clock) as b:
        make_pair(b)
        begin_and_send(b)
        parked = _on_wait(b)
        waiter = _waiting_receive(b, 30)
        assert parked.wait(LONG)
        clock.advance(10)
        assert not waiter.done.is_set()
        clock.advance(25)
        assert waiter.result()[0] == []


def test_closing_the_broker_ends_a_waiting_receive_with_a_broker_error(
    pair: Broker, db_path: Path, spawn: Callable[..., Child],
) -> None:
    # In a child process: a crash there must fail this test, not kill the test run.
    child = spawn("close-while-waiting", db_path)
    outcome = child.expect("outcome")
    assert child.finish() == 0
    assert outcome["waiter_finished"] and outcome["broker_error"], outcome
    assert "closed" in outcome["message"]


def test_a_waiting_receive_in_another_process_wakes_when_a_rollback_here_frees_the_group(
    pair: Broker, db_path: Path, spawn: Callable[..., Child],
) -> None:
    begin_and_send(pair, "retry me")
    holder = Holder(pair, lambda tx: tx.receive("TargetQueue"))
    child = spawn("wait-receive", db_path, "TargetQueue", LONG)
    child.expect("parked")
    holder.finish(commit=False)
    released = time.monotonic()
    out = child.expect("received")
    assert [r["body"] for r in out["rows"]] == ["retry me"]
    assert out["at"] - released < LONG / 2
    assert child.finish() == 0


def test_several_waiting_receives_each_get_a_different_conversation(pair: Broker) -> None:
    waiters = 4
    parked = threading.Semaphore(0)
    original = pair.hooks.waiting

    def spy(qid: int, delta: int) -> None:
        original(qid, delta)
        if delta > 0:
            parked.release()

    pair.hooks.waiting = spy  # type: ignore[method-assign]
    running = [_waiting_receive(pair, LONG) for _ in range(waiters)]
    for _ in range(waiters):
        assert parked.acquire(timeout=LONG)
    for i in range(waiters):  # one new conversation per waiter, each in its own group
        begin_and_send(pair, f"c{i}")
    got = sorted(body for w in running for body in w.result()[0])
    assert got == [f"c{i}" for i in range(waiters)]
