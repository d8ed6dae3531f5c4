"""Property: however sends, receives, commits and rollbacks of several open transactions
interleave, every committed message is received exactly once, in its conversation's order,
and nothing is lost.  Several ``Transaction`` objects are driven from one thread, so each
interleaving is reproducible; a small model says what each statement must return."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from support.helpers import make_pair

from sbroker import Broker, Transaction

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
        self.locked: dict[int, set[int]] = {}  # conversation groups held, by conversation
        # Committed and not yet received-and-committed: (body, msn), in order.
        self.queued: dict[int, list[tuple[str, int]]] = {c: [] for c in range(CONVERSATIONS)}
        self.next_msn = [0] * CONVERSATIONS
        self.delivered: dict[int, list[str]] = {c: [] for c in range(CONVERSATIONS)}
        self.sent: dict[int, list[str]] = {c: [] for c in range(CONVERSATIONS)}
        self.counter = 0
        self.by_target: dict[str, int] = {}
        self.by_group: dict[str, int] = {}

    # -- model helpers ----------------------------------------------------------------------
    def _tx(self, t: int) -> Transaction:
        if t not in self.open:
            self.open[t] = self.b.transaction()
            self.sends[t] = []
            self.received[t] = {}
            self.locked[t] = set()
        return self.open[t]

    def _holder(self, c: int) -> int | None:
        return next((t for t, held in self.locked.items() if c in held), None)

    def _eligible(self, t: int) -> list[int]:
        """Conversations an unfiltered RECEIVE by ``t`` could be given."""
        return [c for c in range(CONVERSATIONS) if self._available(t, c)]

    def _available(self, t: int, c: int) -> list[tuple[str, int]]:
        """What transaction ``t`` may still receive of conversation ``c``."""
        holder = self._holder(c)
        if holder not in (None, t):
            return []
        return self.queued[c][len(self.received.get(t, {}).get(c, [])):]

    def _target(self, c: int) -> dict[str, Any] | None:
        """Conversation ``c``'s target endpoint row (None before its first message)."""
        rows = self.b.view("conversation_endpoints")
        conversation = next(r["conversation_id"] for r in rows
                            if r["conversation_handle"] == self.handles[c])
        return next((r for r in rows if r["conversation_id"] == conversation
                     and not r["is_initiator"]), None)

    def _learn(self) -> None:
        """Map the target handles and groups that exist by now to our conversations."""
        for c in range(CONVERSATIONS):
            target = self._target(c)
            if target is not None:
                self.by_target[target["conversation_handle"]] = c
                self.by_group[target["conversation_group_id"]] = c

    def _conversation(self, target_handle: str) -> int:
        """Which of our conversations a target-side handle belongs to."""
        if target_handle not in self.by_target:
            self._learn()
        return self.by_target[target_handle]

    def _forget(self, t: int) -> None:
        del self.open[t], self.sends[t], self.received[t], self.locked[t]

    def _took(self, t: int, c: int, got: list[Any], top: int | None) -> None:
        """Check that ``got`` is what ``t`` may receive of ``c`` now, and record it."""
        expected = self._available(t, c)
        assert expected, f"conversation {c} was handed out but is locked or empty"
        if top is not None:
            expected = expected[:top]
        assert [(m.text(), m.message_sequence_number) for m in got] == expected
        self.received[t].setdefault(c, []).extend(expected)
        self.locked[t].add(c)

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
            eligible = self._eligible(t)
            assert eligible == [], f"RECEIVE returned nothing while {eligible} had messages"
            return
        assert len({m.conversation_group_id for m in got}) == 1
        self._took(t, self._conversation(got[0].conversation_handle), got, top)

    @rule(t=txs, c=st.integers(0, CONVERSATIONS - 1), top=st.sampled_from([1, None]),
          by=st.sampled_from(["conversation_handle", "conversation_group_id"]))
    def receive_filtered(self, t: int, c: int, top: int | None, by: str) -> None:
        target = self._target(c)
        if target is None:
            return
        key = "conversation_handle" if by == "conversation_handle" else "conversation_group_id"
        tx = self._tx(t)
        got = tx.receive("TargetQueue", top=top, **{by: target[key]})
        if got:
            self._took(t, c, got, top)
            return
        assert self._available(t, c) == [], f"conversation {c} had messages for {t}"
        if target["conversation_group_id"] in tx.locked_groups:
            self.locked[t].add(c)  # an empty filtered RECEIVE may keep the group locked

    @rule(t=txs)
    def get_conversation_group(self, t: int) -> None:
        group = self._tx(t).get_conversation_group("TargetQueue")
        if group is None:
            assert self._eligible(t) == []
            return
        if group not in self.by_group:
            self._learn()
        c = self.by_group[group]
        assert c in self._eligible(t), f"group of conversation {c} was not eligible for {t}"
        self.locked[t].add(c)

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

    @invariant()
    def peek_shows_what_is_committed_and_not_consumed(self) -> None:
        expected = sorted(body for q in self.queued.values() for body, _ in q)
        assert sorted(m.text() for m in self.b.peek("TargetQueue")) == expected

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
            self.b.db.writer.run(self.b.db.sweeper.sweep)
            with self.b.db.connection() as conn:  # the sweep leaves no message, no mark
                assert conn.execute("SELECT (SELECT count(*) FROM sb_messages)"
                                    " + (SELECT count(*) FROM sb_consumed)").fetchone() == (0,)
        finally:
            self.b.close()


Interleavings.TestCase.settings = settings(
    max_examples=50, stateful_step_count=50, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_interleavings_deliver_every_committed_message_once_in_order = Interleavings.TestCase



class MarkingEveryReceivedRow(Interleavings):
    """The same with every received row marked, not deleted (consumed.py), and a sweep by
    every second receiving commit: marks and sweeps interleave with open transactions."""

    def __init__(self) -> None:
        super().__init__()
        self.b.db.sweeper.dense, self.b.db.sweeper.every_commits = 0, 2


MarkingEveryReceivedRow.TestCase.settings = Interleavings.TestCase.settings
test_interleavings_marking_every_received_row = MarkingEveryReceivedRow.TestCase
