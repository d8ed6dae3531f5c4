"""A server restart during work (docs/postgresql.md): transactions in flight fail with a clear
error, nothing committed is lost, and the broker reconnects by itself."""

from __future__ import annotations

import pytest
from support.postgres import RunServer

import sbroker
from sbroker import Broker


def test_a_restart_fails_the_transactions_in_flight_and_the_broker_goes_on(
        pg_pair: Broker, postgres: RunServer) -> None:
    with pg_pair.transaction() as tx:
        handle = tx.begin_dialog("InitService", "TargetService")
        for i in range(10):
            tx.send(handle, body=f"m{i}")
    in_flight = pg_pair.transaction()
    assert [m.text() for m in in_flight.receive("TargetQueue", top=3)] == ["m0", "m1", "m2"]
    sending = pg_pair.transaction()
    sending.send(handle, body="never")

    postgres.server.restart()

    with pytest.raises(sbroker.DatabaseError, match="connection to PostgreSQL was lost"):
        in_flight.commit()
    with pytest.raises(sbroker.DatabaseError, match="connection to PostgreSQL was lost"):
        sending.commit()
    # New transactions reconnect by themselves; nothing committed is lost, nothing doubled.
    with pg_pair.transaction() as tx:
        got = [m.text() for m in tx.receive("TargetQueue")]
    assert got == [f"m{i}" for i in range(10)]
    with pg_pair.transaction() as tx:
        tx.send(handle, body="after")
    assert [m.text() for m in pg_pair.peek("TargetQueue")] == ["after"]
    assert pg_pair.view("dm_broker_sessions")  # the session is still there


def test_a_waiting_receive_survives_a_restart_and_gets_the_message_sent_after_it(
        pg_pair: Broker, postgres: RunServer) -> None:
    import threading

    parked = threading.Event()
    original = pg_pair.hooks.waiting

    def spy(queue_id: int, delta: int) -> None:
        original(queue_id, delta)
        if delta > 0:
            parked.set()

    pg_pair.hooks.waiting = spy  # type: ignore[method-assign]
    outcome: list[object] = []

    def wait() -> None:
        try:
            with pg_pair.transaction() as tx:
                outcome.append([m.text() for m in tx.receive("TargetQueue", timeout=60)])
        except sbroker.BrokerError as exc:
            outcome.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert parked.wait(30)
    postgres.server.restart()
    with pg_pair.transaction() as tx:
        tx.send(tx.begin_dialog("InitService", "TargetService"), body="after the restart")
    waiter.join(60)
    [result] = outcome
    if isinstance(result, sbroker.BrokerError):  # its connection went with the restart
        assert "connection to PostgreSQL was lost" in str(result)
        with pg_pair.transaction() as tx:
            result = [m.text() for m in tx.receive("TargetQueue", timeout=10)]
    assert result == ["after the restart"]
