"""``tx.execute``: application statements in the broker's database commit and roll back
together with the broker effects of the same transaction (the seeds 002 and 004 rely on it)."""

from __future__ import annotations

import contextlib
import threading

import pytest
from support.helpers import Background, begin_and_send, bodies

import sbroker
from sbroker import Broker, CommitConflictError


@pytest.fixture
def app(pair: Broker) -> Broker:
    with pair.db.connection() as conn:
        conn.execute("CREATE TABLE work_log (note TEXT NOT NULL UNIQUE)")
    return pair


def _notes(b: Broker) -> list[str]:
    return [r["note"] for r in b.view("work_log")]


def _handle_and_log(tx: sbroker.Transaction, note: str) -> str:
    """Receive the request, log it, reply: the reply handle."""
    got = tx.receive("TargetQueue")
    assert bodies(got) == ["request"]
    tx.execute("INSERT INTO work_log(note) VALUES (?)", (note,))
    tx.send(got[0].conversation_handle, body="done")
    return got[0].conversation_handle


def test_a_committed_transaction_keeps_the_row_the_receive_and_the_reply(app: Broker) -> None:
    begin_and_send(app, "request")
    with app.transaction() as tx:
        _handle_and_log(tx, "handled")
        # The application sees its own uncommitted row.
        assert tx.execute("SELECT note FROM work_log").fetchall() == [("handled",)]
    assert _notes(app) == ["handled"]
    assert app.peek("TargetQueue") == []
    assert bodies(app.peek("InitQueue")) == ["done"]


@pytest.mark.parametrize("how", ["exception", "rollback"])
def test_a_rolled_back_transaction_undoes_the_row_the_receive_and_the_reply(
    app: Broker, how: str,
) -> None:
    begin_and_send(app, "request")
    states = app.view("conversation_endpoints")

    class Failure(Exception):
        pass

    expected = pytest.raises(Failure) if how == "exception" else contextlib.nullcontext()
    with expected, app.transaction() as tx:
        _handle_and_log(tx, "handled")
        if how == "exception":
            raise Failure
        tx.rollback()
    assert _notes(app) == []
    assert bodies(app.peek("InitQueue")) == []
    assert app.view("conversation_endpoints") == states
    with app.transaction() as tx:  # and the request can be handled again
        _handle_and_log(tx, "second try")
    assert _notes(app) == ["second try"]


def test_a_failing_application_statement_rolls_back_everything_with_it(app: Broker) -> None:
    with app.transaction() as tx:
        tx.execute("INSERT INTO work_log(note) VALUES ('first')")
    begin_and_send(app, "request")
    with pytest.raises(sbroker.BrokerError, match="(?i)unique"), app.transaction() as tx:
        _handle_and_log(tx, "handled")
        tx.execute("INSERT INTO work_log(note) VALUES ('first')")  # duplicate
    assert _notes(app) == ["first"]
    assert bodies(app.peek("TargetQueue")) == ["request"]
    assert app.peek("InitQueue") == []


def test_a_broker_effect_that_fails_at_commit_takes_the_application_row_with_it(
    app: Broker,
) -> None:
    handle = begin_and_send(app, "request")
    tx = app.transaction()
    tx.send(handle, body="second")

    def remove_conversation() -> None:  # another transaction removes it before COMMIT
        with app.transaction() as other:
            other.end_conversation(handle, cleanup=True)

    Background(remove_conversation).result()
    tx.execute("INSERT INTO work_log(note) VALUES ('sent the second message')")
    with pytest.raises(CommitConflictError):
        tx.commit()
    assert _notes(app) == []


def test_other_transactions_see_the_row_only_after_commit(app: Broker) -> None:
    with app.transaction() as tx:
        tx.execute("INSERT INTO work_log(note) VALUES ('pending')")
        assert Background(lambda: _notes(app)).result() == []
    assert _notes(app) == ["pending"]



def test_concurrent_commits_succeed_or_fail_each_on_their_own(pair: Broker) -> None:
    """Commits that share one SQLite write (group commit): one that conflicts is undone
    alone; all the others land complete."""
    handles = [begin_and_send(pair) for _ in range(24)]
    doomed = set(handles[::3])
    txs = []
    for i, handle in enumerate(handles):
        tx = pair.transaction()
        tx.send(handle, body=f"{i}:a")
        tx.send(handle, body=f"{i}:b")
        txs.append(tx)
    with pair.transaction() as tx:  # removed before the commits below
        for handle in doomed:
            tx.end_conversation(handle, cleanup=True)
    gate = threading.Barrier(len(txs))

    def commit(tx: sbroker.Transaction) -> str:
        gate.wait()
        try:
            tx.commit()
        except CommitConflictError:
            return "conflict"
        return "ok"

    workers = [Background(lambda tx=tx: commit(tx)) for tx in txs]
    outcomes = [w.result() for w in workers]
    assert outcomes == ["conflict" if h in doomed else "ok" for h in handles]
    expected = sorted(f"{i}:{x}" for i, h in enumerate(handles) if h not in doomed
                      for x in "ab")
    assert sorted(bodies(pair.peek("TargetQueue"))) == expected
