"""``sbroker activator``'s engine room: open the broker, subscribe, run the external
activator until stopped."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from sbroker.broker import Broker
from sbroker.services.activation.external import (
    ANY_QUEUE,
    ActivatorStats,
    ExternalActivator,
    subscribe,
)

log = logging.getLogger("sbroker.activator")


def run_activator(database: str | os.PathLike[str], notification_queue: str,
                  commands: Mapping[str, str | Sequence[str]], *, max_per_queue: int = 1,
                  monitor_interval: float = 5.0, start_monitors: bool = True,
                  setup: bool = True, stop: threading.Event | None = None,
                  poll_seconds: float = 1.0, terminate_timeout: float = 10.0,
                  **open_options: Any) -> ActivatorStats:
    """``sbroker activator``: run until ``stop`` is set (the CLI sets it on SIGINT/SIGTERM).

    ``start_monitors`` runs this process's monitors of externally activated queues (turn off
    if another started broker, such as ``sbroker serve``, runs them); ``setup`` creates the
    notification queue, service and subscriptions for the named queues.  Children still
    running at the end get SIGTERM.
    """
    stop = stop or threading.Event()
    broker = Broker.open(database, monitor_interval=monitor_interval, **open_options)
    activator: ExternalActivator | None = None
    try:
        if setup:
            subscribe(broker, notification_queue, [q for q in commands if q != ANY_QUEUE])
        activator = ExternalActivator(broker, notification_queue, commands,
                                      max_per_queue=max_per_queue, database=str(database))
        if start_monitors:
            broker.activation.internal = False  # internal activation is its owner's business
            broker.start()
        log.info("activator running", extra={
            "database": str(database), "queue": notification_queue, "max": max_per_queue})
        activator.run(stop, poll_seconds=poll_seconds)
        return activator.stats
    finally:
        if activator is not None:
            activator.terminate(terminate_timeout)
        broker.close()
