"""Property: however sends, receives, commits and rollbacks of several open transactions
interleave, every committed message is received exactly once, in its conversation's order,
and nothing is lost.  Several ``Transaction`` objects are driven from one thread, so each
interleaving is reproducible; a small model says what each statement must return."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from sbroker import Broker, Transaction

from .helpers import make_pair

CONVERSATIONS = 3
TRANSACTIONS = 3

txs = st.integers(0, TRANSACTIONS - 1)


class Interleavings(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.b = Broker.open(":memory:")
        make_pair(self.b, poison_message_handling=False)
        with self.b.transaction() as tx:
            self.handles = [tx.begin_dialog("InitService", "TargetService")
                            for _ in range(CONVERSATIONS)]
        self.open: dict[int, Transaction] = {}
        # Per open transaction: sends not yet committed, and what it received per conversation.
        self.sends: dict[int, list[tuple[int, str]]] = {}
        self.received: dict[int, dict[int, list[tuple[str, int]]]] = {}
        # Committed and not yet received-and-committed: (body, msn), in order.
        self.queued: dict[int, list[tuple[str, int]]] = {c: [] for c in range(CONVERSATIONS)}
        self.next_msn = [0] * CONVERSATIONS
        self.delivered: dict[int, list[str]] = {c: [] for c in range(CONVERSATIONS)}
        self.sent: dict[int, list[str]] = {c: [] for c in range(CONVERSATIONS)}
        self.counter = 0
        self.by_target: dict[str, int] = {}

    # -- model helpers ----------------------------------------------------------------------
    def _tx(self, t: int) -> Transaction:
        if t not in self.open:
            self.open[t] = self.b.transaction()
            self.sends[t] = []
            self.received[t] = {}
        return self.open[t]

    def _holder(self, c: int) -> int | None:
        return next((t for t, got in self.received.items() if c in got), None)

    def _available(self, t: int, c: int) -> list[tuple[str, int]]:
        """What transaction ``t`` may still receive of conversation ``c``."""
        holder = self._holder(c)
        if holder not in (None, t):
            return []
        return self.queued[c][len(self.received.get(t, {}).get(c, [])):]

    def _conversation(self, target_handle: str) -> int:
        """Which of our conversations a target-side handle belongs to."""
        if target_handle not in self.by_target:
            rows = self.b.view("conversation_endpoints")
            ids = {r["conversation_handle"]: r["conversation_id"] for r in rows}
            self.by_target[target_handle] = next(
                c for c, h in enumerate(self.handles) if ids[h] == ids[target_handle])
        return self.by_target[target_handle]

    def _forget(self, t: int) -> None:
        del self.open[t], self.sends[t], self.received[t]

    # -- rules ----------------------------------------------------------------------------------
    @rule(t=txs, convs=st.sets(st.integers(0, CONVERSATIONS - 1), min_size=1))
    def send(self, t: int, convs: set[int]) -> None:
        self.counter += 1
        body = f"m{self.counter}"
        self._tx(t).send([self.handles[c] for c in sorted(convs)], body=body)
        self.sends[t].extend((c, body) for c in sorted(convs))

    @rule(t=txs, top=st.sampled_from([1, 2, None]))
    def receive(self, t: int, top: int | None) -> None:
        got = self._tx(t).receive("TargetQueue", top=top)
        if not got:
            eligible = [c for c in range(CONVERSATIONS) if self._available(t, c)]
            assert eligible == [], f"RECEIVE returned nothing while {eligible} had messages"
            return
        assert len({m.conversation_group_id for m in got}) == 1
        c = self._conversation(got[0].conversation_handle)
        expected = self._available(t, c)
        assert expected, f"conversation {c} was handed out but is locked or empty"
        if top is not None:
            expected = expected[:top]
        assert [(m.text(), m.message_sequence_number) for m in got] == expected
        self.received[t].setdefault(c, []).extend(expected)

    @rule(t=txs)
    def commit(self, t: int) -> None:
        if t not in self.open:
            return
        self.open[t].commit()
        for c, got in self.received[t].items():
            assert self.queued[c][:len(got)] == got
            del self.queued[c][:len(got)]
            self.delivered[c].extend(body for body, _ in got)
        for c, body in self.sends[t]:
            self.queued[c].append((body, self.next_msn[c]))
            self.next_msn[c] += 1
            self.sent[c].append(body)
        self._forget(t)

    @rule(t=txs)
    def rollback(self, t: int) -> None:
        if t in self.open:
            self.open[t].rollback()
            self._forget(t)

    def teardown(self) -> None:
        try:
            for tx in self.open.values():
                tx.rollback()
            self.open.clear()
            with self.b.transaction() as tx:  # drain: the rest arrives, in order, once
                while got := tx.receive("TargetQueue"):
                    c = self._conversation(got[0].conversation_handle)
                    self.delivered[c].extend(m.text() for m in got)
            assert self.delivered == self.sent
        finally:
            self.b.close()


Interleavings.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_interleavings_deliver_every_committed_message_once_in_order = Interleavings.TestCase

