"""Who drives a run: the only place that decides it (docs/pipelines.md, "Running in
production").

The process driving a run holds the run's lease in ``PipelineRuns``: a fencing token, the
broker session of the driver and an expiry by the database's clock (never by comparing two
hosts' clocks).  A lease is live while it has not expired and the driver's session lives; a
session whose process is gone (on this host: at once) is dead, so its leases are free at once.
Every bookkeeping commit of a driver runs :func:`fence` first: it renews the lease if the
token is still the run's, and otherwise raises :class:`LeaseLost`, which rolls the commit
back: a driver that was paused or cut off past its lease records nothing more.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from sbroker.apps.pipeline.runstate import Lease
from sbroker.apps.pipeline.store import RunStore
from sbroker.apps.sql import dicts
from sbroker.core.errors import BrokerError
from sbroker.engine.api import BrokerAPI
from sbroker.engine.transaction import Transaction

__all__ = ["Driver", "LeaseHeld", "LeaseLost", "acquire", "driver_of", "fence",
           "forget_dead_sessions", "release", "renew_every", "request_cancel"]


class LeaseLost(BrokerError):
    """Another driver took the run over (this one's lease expired): it records nothing more."""


class LeaseHeld(BrokerError):
    """A live driver holds the run: ``host`` and ``pid`` name it."""

    def __init__(self, run_id: int, host: str | None, pid: int | None) -> None:
        self.run_id, self.host, self.pid = run_id, host, pid
        super().__init__(f"run {run_id} is being driven by {host or '?'} (pid {pid or '?'})")


@dataclass(frozen=True)
class Driver:
    """The process that drives: its broker session, host and pid."""

    session: int
    host: str
    pid: int

    @classmethod
    def of(cls, broker: BrokerAPI) -> Driver:
        return cls(broker.session_id, socket.gethostname(), os.getpid())

    def row(self) -> tuple[int, str, int]:
        return self.session, self.host, self.pid


def renew_every(lease: Lease) -> float:
    """How often an idle driver renews (and looks for a cancel request): several times a
    lease, and at least every second so that a cancel is heard at once."""
    return min(1.0, lease.seconds / 3)


def forget_dead_sessions(broker: BrokerAPI) -> int:
    """Reap the broker sessions whose process died, so that their leases count as expired
    (reading the sessions' view reaps first); how many live."""
    return len(broker.view("dm_broker_sessions"))


def acquire(broker: BrokerAPI, tx: Transaction, run_id: int, seconds: float) -> Lease:
    """Inside ``tx``: take run ``run_id``'s lease for ``seconds``; ``LeaseHeld`` (naming the
    driver) when a live one holds it.  Of two processes trying at once, one gets it."""
    store = RunStore(broker)
    me = Driver.of(broker)
    rows = dicts(tx.execute(store.sql.acquire_lease, (*me.row(), seconds, seconds, me.session,
                                                      run_id)))
    if not rows:
        row = store.run(run_id, tx) or {}
        raise LeaseHeld(run_id, row.get("driver_host"), row.get("driver_pid"))
    return Lease(run_id, int(rows[0]["lease_token"]), seconds)


def fence(broker: BrokerAPI, tx: Transaction, lease: Lease) -> bool:
    """Inside a driver's bookkeeping transaction: renew ``lease``, or raise ``LeaseLost``
    (the transaction then rolls back).  Whether a cancel of the run was asked for."""
    rows = dicts(tx.execute(RunStore(broker).sql.fence, (lease.run_id, lease.token)))
    if not rows:
        raise LeaseLost(f"run {lease.run_id}: another process drives it now")
    return bool(rows[0]["cancel_requested"])


def release(broker: BrokerAPI, tx: Transaction, lease: Lease) -> None:
    """Inside ``tx``: end ``lease`` now (if it is still ours): the run is free to take."""
    tx.execute(RunStore(broker).sql.release_lease, (lease.run_id, lease.token))


def request_cancel(broker: BrokerAPI, tx: Transaction, run_id: int) -> bool:
    """Inside ``tx``: ask run ``run_id``'s driver to cancel it; False if it is not running."""
    return bool(tx.execute(RunStore(broker).sql.request_cancel, (run_id,)).rowcount == 1)


def driver_of(row: dict[str, Any]) -> dict[str, Any] | None:
    """``{"host", "pid"}`` of a run row's live driver, or None."""
    if not row.get("live") or row.get("status") != "running":
        return None
    return {"host": row["driver_host"], "pid": row["driver_pid"]}
