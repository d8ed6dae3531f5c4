"""A queue monitor (docs/activation.md): the facts it tracks and the decision whether to
activate (pure).

Activation is needed when the queue has receivable messages (ready, in a conversation group
no transaction holds locked: a backlog in a group that is already being read gives a new
reader no useful work) and either

(a) messages arrived at a queue that had none receivable and no activated procedure runs, or
(b) no session waits in an unfiltered RECEIVE / GET CONVERSATION GROUP and no such statement
    returned an empty result for ``monitor_interval`` seconds, counted from the last empty
    result or the last activation, whichever is later: readers are not keeping up.  This is
    the ramp-up: one more reader per interval, only while readers keep finding work.

After activating, the monitor is NOTIFIED and activates nothing more until a RECEIVE from the
queue, the queue found drained, the activated procedures all exited, or ``monitor_interval``.

(c) An sbroker extension: a running procedure may ask for another reader at once
(``ActivationContext.request_reader``); it is started when the queue has receivable messages
and fewer than ``max_queue_readers`` run, without waiting for ``monitor_interval``.  The task
scheduler's executor asks after each task it takes, so that a stage's tasks run together from
the first stage on (seed 002's executor pays SQL Server's ramp instead).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

INACTIVE = "INACTIVE"
NOTIFIED = "NOTIFIED"
RECEIVES_OCCURRING = "RECEIVES_OCCURRING"
INTERNAL = "internal"
EXTERNAL = "external"


def _since(now: float, t: float | None) -> float:
    return float("inf") if t is None else now - t


@dataclass
class Monitor:
    """What one queue monitor knows; times are seconds on the broker's clock."""

    queue_id: int
    queue_name: str
    kind: str = INTERNAL
    state: str = INACTIVE
    last_empty_rowset_time: float | None = None
    last_activated_time: float | None = None
    last_receive_time: float | None = None
    tasks_waiting: int = 0
    tasks_running: int = 0
    tasks_started: int = 0
    tasks_failed: int = 0
    notifications_sent: int = 0
    empty_receives: int = 0  # a pass checks that none came back empty while it looked
    last_error: str | None = None
    seen_empty: bool = True  # the last look found no ready message at all
    failed: bool = False  # the last activated procedure raised: no immediate restart
    max_readers: int | None = None  # the queue's max_queue_readers at the last pass
    wanted: bool = False  # a running procedure asked for another reader now (rule c)

    def note_receive(self, now: float, *, empty: bool) -> None:
        """A RECEIVE / GET CONVERSATION GROUP on the queue returned."""
        if empty:
            self.empty_receives += 1
            self.last_empty_rowset_time = now
            self.seen_empty = True
        else:
            self.last_receive_time = now
            if self.state == NOTIFIED:
                self.state = RECEIVES_OCCURRING

    def _notified_pending(self, now: float, interval: float) -> bool:
        if self.state != NOTIFIED:
            return False
        if self.kind == INTERNAL and self.tasks_running == 0:
            return False  # what was started has exited already
        return _since(now, self.last_activated_time) < interval

    def needs_look(self, now: float, interval: float, max_readers: int) -> bool:
        """Whether the decision depends on the queue's contents (else skip the query)."""
        if self._notified_pending(now, interval):
            return False
        return not (self.kind == INTERNAL and self.tasks_running >= max_readers)

    def event_may_activate(self, now: float, interval: float) -> bool:
        """Whether an event (an arrival, a RECEIVE, a session starting or ending a wait)
        could make ``decide`` activate now.  When False only time can, and the pass that
        ``next_check`` scheduled covers that: skipping the pass changes no decision."""
        if self.kind != INTERNAL or self.max_readers is None:
            return True
        if self.tasks_running >= self.max_readers:
            return False  # no room
        if self.wanted:
            return True  # (c) asked for by a running procedure
        if self.tasks_running == 0:
            return True  # (a) an arrival to an empty queue
        quiet = min(_since(now, self.last_empty_rowset_time),
                    _since(now, self.last_activated_time))
        return self.tasks_waiting == 0 and quiet >= interval  # (b) may hold already

    def _idle_state(self, now: float, interval: float) -> str:
        if self.tasks_running > 0 or (
            self.kind == EXTERNAL and _since(now, self.last_receive_time) < interval
        ):
            return RECEIVES_OCCURRING
        return INACTIVE

    def decide(self, now: float, interval: float, *, enabled: bool, available: bool | None,
               max_readers: int, ready: bool | None = None) -> bool:
        """Update the state; True when a reader must be activated (or notified) now.

        ``available``: whether the queue has receivable messages (None: not looked at);
        ``ready``: whether it has ready messages at all, locked groups included.
        """
        if ready is not None and not ready:
            self.seen_empty = True
        if self._notified_pending(now, interval):
            if available is False:
                self.state = self._idle_state(now, interval)
            return False
        if not enabled or available is None:
            self.state = self._idle_state(now, interval)
            return False
        if not available:
            self.seen_empty = self.seen_empty or ready is None
            self.state = self._idle_state(now, interval)
            return False
        arrived_to_empty = self.seen_empty and self.tasks_running == 0 and not self.failed
        quiet = min(_since(now, self.last_empty_rowset_time), _since(now, self.last_activated_time))
        lagging = self.tasks_waiting == 0 and quiet >= interval
        wanted, self.wanted = self.wanted and self.kind == INTERNAL, False
        self.seen_empty = False
        room = self.kind == EXTERNAL or self.tasks_running < max_readers
        if (arrived_to_empty or lagging or wanted) and room:
            self.state = NOTIFIED
            self.last_activated_time = now
            return True
        self.state = self._idle_state(now, interval)
        return False

    def next_check(self, now: float, interval: float) -> float:
        """When the decision may change by the passing of time alone."""
        times = [now + interval]
        for t in (self.last_activated_time, self.last_empty_rowset_time):
            if t is not None and t + interval > now:
                times.append(t + interval)
        return min(times)

    def row(self) -> dict[str, Any]:
        return {
            "queue_id": self.queue_id,
            "queue_name": self.queue_name,
            "activation_kind": self.kind,
            "state": self.state,
            "last_empty_rowset_time": self.last_empty_rowset_time,
            "last_activated_time": self.last_activated_time,
            "tasks_waiting": self.tasks_waiting,
            "tasks_running": self.tasks_running,
            "tasks_started": self.tasks_started,
            "tasks_failed": self.tasks_failed,
            "notifications_sent": self.notifications_sent,
            "last_error": self.last_error,
        }
