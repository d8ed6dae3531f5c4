"""The applier: received messages committed on their own thread, in order per peer, with
what arrives during a commit going into the next one and nothing applied over a refusal."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from uuid import UUID

import pytest

from sbroker.protocol import Message
from sbroker.services.network.applier import Applier

PEER, OTHER = UUID(int=1), UUID(int=2)
WAIT = 20.0  # seconds; a bound that a working applier never reaches


def msgs(*seqs: int) -> list[Message]:
    return [Message(UUID(int=9), True, s, "T", b"x", "from", "to") for s in seqs]


class Harness:
    """A deliver function the test holds and releases, and outcomes run on the test thread
    (standing for the transport's loop)."""

    def __init__(self) -> None:
        self.calls: list[tuple[UUID, list[int]]] = []
        self.entered: queue.Queue[None] = queue.Queue()
        self.gate = threading.Event()
        self.gate.set()
        self.fail: set[UUID] = set()
        self.posted: queue.Queue[Callable[[], None]] = queue.Queue()
        self.outcomes: list[tuple[str, UUID, list[int]]] = []
        self.applier = Applier(
            self.deliver,
            applied=lambda p, m: self.outcomes.append(("applied", p, [x.seq for x in m])),
            refused=lambda p, m: self.outcomes.append(("refused", p, [x.seq for x in m])),
            post=self.posted.put,
        )

    def deliver(self, peer: UUID, messages: list[Message]) -> None:
        self.entered.put(None)
        assert self.gate.wait(WAIT)
        self.calls.append((peer, [m.seq for m in messages]))
        if peer in self.fail:
            raise RuntimeError("queue disabled")

    def run_outcome(self) -> None:
        """Run the next outcome the applier posted, as the loop thread would."""
        self.posted.get(timeout=WAIT)()


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness()
    yield harness
    harness.gate.set()
    harness.applier.stop()


def test_messages_arriving_during_a_commit_go_together_in_the_next(h: Harness) -> None:
    h.gate.clear()
    h.applier.submit(PEER, msgs(0))
    h.entered.get(timeout=WAIT)  # the first commit is under way
    h.applier.submit(PEER, msgs(1, 2))
    h.applier.submit(PEER, msgs(3))
    h.gate.set()
    h.run_outcome()
    h.run_outcome()
    assert h.calls == [(PEER, [0]), (PEER, [1, 2, 3])]
    assert h.outcomes == [("applied", PEER, [0]), ("applied", PEER, [1, 2, 3])]


def test_after_a_refusal_nothing_is_applied_over_the_gap_until_resumed(h: Harness) -> None:
    h.fail.add(PEER)
    h.gate.clear()
    h.applier.submit(PEER, msgs(0, 1))
    h.entered.get(timeout=WAIT)
    h.applier.submit(PEER, msgs(2))  # decoded while the refused commit ran
    h.gate.set()
    h.run_outcome()
    assert h.outcomes == [("refused", PEER, [0, 1])]
    h.applier.submit(PEER, msgs(3))  # still before the loop thread took note of it
    h.applier.submit(OTHER, msgs(0))  # another peer is not held back
    h.run_outcome()
    assert h.outcomes[-1] == ("applied", OTHER, [0])
    assert [m.seq for m in h.applier.resume(PEER)] == [2, 3]  # to be refused as well
    h.fail.clear()
    h.applier.submit(PEER, msgs(0, 1, 2, 3))  # the retransmission
    h.run_outcome()
    assert h.outcomes[-1] == ("applied", PEER, [0, 1, 2, 3])
    assert (PEER, [2]) not in h.calls and (PEER, [3]) not in h.calls


def test_stop_finishes_the_commit_under_way_and_drops_what_waits(h: Harness) -> None:
    h.gate.clear()
    h.applier.submit(PEER, msgs(0))
    h.entered.get(timeout=WAIT)
    h.applier.submit(PEER, msgs(1))
    h.applier.close()
    h.gate.set()
    h.applier.join(WAIT)
    assert h.calls == [(PEER, [0])]  # what waited was dropped, never applied
