"""The queue monitor's decision rules (docs/activation.md), on the pure Monitor record."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from sbroker.services.activation.monitor import (
    EXTERNAL,
    INACTIVE,
    NOTIFIED,
    RECEIVES_OCCURRING,
    Monitor,
)

INTERVAL = 5.0  # monitor_interval


def decide(mon: Monitor, now: float, available: bool = True, max_readers: int = 4) -> bool:
    return mon.decide(now, INTERVAL, enabled=True, available=available, max_readers=max_readers)


def test_a_message_arriving_at_an_empty_queue_with_no_reader_activates_at_once() -> None:
    mon = Monitor(1, "q")
    assert not decide(mon, 0.0, available=False)
    assert mon.state == INACTIVE
    assert decide(mon, 0.1)
    assert mon.state == NOTIFIED
    assert mon.last_activated_time == 0.1


def test_no_second_activation_while_notified_until_a_receive() -> None:
    mon = Monitor(1, "q")
    assert decide(mon, 0.0)
    mon.tasks_running = 1
    assert not decide(mon, 4.0)
    assert mon.state == NOTIFIED
    mon.note_receive(4.5, empty=False)
    assert mon.state == RECEIVES_OCCURRING


def test_readers_not_keeping_up_for_an_interval_start_one_more() -> None:
    mon = Monitor(1, "q")
    assert decide(mon, 0.0)
    mon.tasks_running = 1
    mon.note_receive(0.1, empty=False)
    assert not decide(mon, 4.9)
    assert decide(mon, 5.0)
    mon.tasks_running = 2
    mon.note_receive(5.1, empty=False)
    assert not decide(mon, 9.9)
    assert decide(mon, 10.0)


def test_a_recent_empty_result_means_readers_keep_up() -> None:
    mon = Monitor(1, "q")
    assert decide(mon, 0.0)
    mon.tasks_running = 1
    mon.note_receive(1.0, empty=False)
    mon.note_receive(3.0, empty=True)
    assert not decide(mon, 7.0)  # messages again, but the last empty result is 4 s old
    assert decide(mon, 8.0)


def test_a_session_waiting_in_receive_blocks_the_backlog_rule() -> None:
    mon = Monitor(1, "q")
    assert decide(mon, 0.0)
    mon.tasks_running = 1
    mon.note_receive(0.1, empty=False)
    mon.tasks_waiting = 1
    assert not decide(mon, 50.0)
    mon.tasks_waiting = 0
    assert decide(mon, 50.0)


def test_never_more_than_max_queue_readers() -> None:
    mon = Monitor(1, "q")
    mon.tasks_running = 2
    assert not mon.needs_look(100.0, INTERVAL, max_readers=2)
    assert not decide(mon, 100.0, max_readers=2)
    assert mon.state == RECEIVES_OCCURRING


def test_nothing_receivable_means_no_activation() -> None:
    mon = Monitor(1, "q")
    for t in (0.0, 10.0, 20.0):
        assert not decide(mon, t, available=False)
    assert mon.state == INACTIVE


def test_a_procedure_that_exits_without_receiving_is_replaced_only_after_an_interval() -> None:
    mon = Monitor(1, "q")
    assert decide(mon, 0.0)
    mon.tasks_running = 0  # it failed before its first RECEIVE
    assert not decide(mon, 0.1)
    assert decide(mon, 5.0)


def test_external_notification_waits_for_a_receive_or_the_interval() -> None:
    mon = Monitor(1, "q", kind=EXTERNAL)
    assert decide(mon, 0.0)
    assert not mon.needs_look(2.0, INTERVAL, max_readers=0)
    assert not decide(mon, 2.0)
    assert decide(mon, 5.0)  # no RECEIVE: the wait timed out, and the backlog is still there


def test_external_queue_drained_then_new_message_notifies_again_at_once() -> None:
    mon = Monitor(1, "q", kind=EXTERNAL)
    assert decide(mon, 0.0)
    mon.note_receive(1.0, empty=False)
    mon.note_receive(1.5, empty=True)
    assert not decide(mon, 1.6, available=False)
    assert mon.state == RECEIVES_OCCURRING
    assert decide(mon, 2.0)


def test_messages_locked_by_a_reader_are_not_an_empty_queue() -> None:
    mon = Monitor(1, "q")
    assert decide(mon, 0.0)
    mon.tasks_running = 1
    mon.note_receive(0.1, empty=False)
    assert not mon.decide(0.2, INTERVAL, enabled=True, available=False, ready=True,
                          max_readers=4)
    mon.tasks_running = 0  # the reader rolled back and exited: messages ready again
    assert not decide(mon, 0.3)  # not "arrived at an empty queue": wait for the interval
    assert decide(mon, 5.0)


def test_after_a_failed_procedure_the_restart_waits_for_the_interval() -> None:
    mon = Monitor(1, "q")
    assert decide(mon, 0.0)
    mon.failed = True
    assert not decide(mon, 1.0, available=False)
    assert not decide(mon, 1.1)  # even a message "arriving at an empty queue"
    assert decide(mon, 5.0)


_times = st.one_of(st.none(), st.floats(0.0, 20.0))


@given(running=st.integers(0, 5), waiting=st.integers(0, 2), max_readers=st.integers(1, 4),
       state=st.sampled_from([INACTIVE, NOTIFIED, RECEIVES_OCCURRING]),
       last_empty=_times, last_activated=_times, seen_empty=st.booleans(),
       failed=st.booleans(), now=st.floats(0.0, 30.0), available=st.booleans())
@example(running=0, waiting=0, max_readers=4, state=INACTIVE, last_empty=None,  # rule (a)
         last_activated=None, seen_empty=True, failed=False, now=1.0, available=True)
@example(running=1, waiting=0, max_readers=4, state=RECEIVES_OCCURRING,  # rule (b)
         last_empty=None, last_activated=0.0, seen_empty=False, failed=False, now=10.0,
         available=True)
@settings(max_examples=300, deadline=None)
def test_an_event_the_service_skips_could_not_have_activated(
        running: int, waiting: int, max_readers: int, state: str, last_empty: float | None,
        last_activated: float | None, seen_empty: bool, failed: bool, now: float,
        available: bool) -> None:
    """The service skips the monitor pass an event would cause when ``event_may_activate``
    is False: a pass at that moment must not have activated either."""
    mon = Monitor(1, "q", state=state, tasks_running=running, tasks_waiting=waiting,
                  last_empty_rowset_time=last_empty, last_activated_time=last_activated,
                  seen_empty=seen_empty, failed=failed, max_readers=max_readers)
    if not mon.event_may_activate(now, INTERVAL):
        assert not mon.decide(now, INTERVAL, enabled=True, available=available,
                              max_readers=max_readers)


def test_a_reader_asked_for_by_a_running_procedure_starts_without_waiting_the_interval() -> None:
    # Rule (c), the executor's: readers keep finding work, nobody waits, but the interval has
    # not passed since the last activation — asked for, another reader starts anyway.
    mon = Monitor(1, "q")
    assert decide(mon, 0.0)
    mon.tasks_running = 1
    mon.note_receive(0.1, empty=False)
    assert not decide(mon, 0.2)  # the ramp alone would wait until 5.0
    mon.wanted = True
    assert decide(mon, 0.2)
    assert not mon.wanted  # one reader per request
    mon.tasks_running = 2
    mon.note_receive(0.3, empty=False)
    mon.wanted = True
    assert not decide(mon, 0.3, available=False)  # nothing left to take: no reader
    mon.wanted = True
    assert not decide(mon, 0.3, max_readers=2)  # no room


def test_a_request_is_kept_while_a_reader_just_started_has_not_received_yet() -> None:
    mon = Monitor(1, "q")
    assert decide(mon, 0.0)
    mon.tasks_running = 1
    mon.wanted = True
    assert not decide(mon, 0.1)  # NOTIFIED: the new reader has not received yet
    assert mon.wanted
    mon.note_receive(0.2, empty=False)
    assert decide(mon, 0.2)
