"""The external activator (``sbroker activator``): receives QUEUE_ACTIVATION event
notifications and starts a configured command as an OS process per needed reader, at most
``max_per_queue`` alive per queue.  A process that exits is not restarted: while its queue
still has a backlog, the queue monitor notifies again (after a RECEIVE or monitor_interval)
and a new one starts then.  Children get ``SBROKER_DATABASE`` and ``SBROKER_QUEUE``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from sbroker.core import messages as m
from sbroker.core.clock import SYSTEM_CLOCK
from sbroker.core.errors import DuplicateError, InvalidArgumentError
from sbroker.engine import events
from sbroker.engine.api import BrokerAPI

log = logging.getLogger("sbroker.activator")
ANY_QUEUE = "*"


@dataclass
class ActivatorStats:
    """What the activator did: processes started, exited with 0, exited otherwise."""

    started: int = 0
    exited_ok: int = 0
    failed: int = 0
    ignored: int = 0  # notifications that found the queue at its maximum or unconfigured
    terminated: int = 0  # stopped by the activator itself when it stopped
    peak: dict[str, int] = field(default_factory=dict)


def _argv(command: str | Sequence[str]) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if not argv:
        raise InvalidArgumentError("an activator command must not be empty")
    return argv


class ExternalActivator:
    """Starts ``commands[queue]`` (or ``commands["*"]``) when the queue's activation is notified."""

    def __init__(self, broker: BrokerAPI, notification_queue: str,
                 commands: Mapping[str, str | Sequence[str]], *, max_per_queue: int = 1,
                 env: Mapping[str, str] | None = None, database: str = "",
                 popen: Callable[..., subprocess.Popen[bytes]] = subprocess.Popen) -> None:
        if isinstance(max_per_queue, bool) or not isinstance(max_per_queue, int) \
                or max_per_queue < 1:
            raise InvalidArgumentError("max_per_queue must be an int >= 1")
        if not commands:
            raise InvalidArgumentError("the activator needs at least one command")
        self.broker = broker
        self.notification_queue = notification_queue
        self.commands = {queue: _argv(cmd) for queue, cmd in commands.items()}
        self.max_per_queue = max_per_queue
        self.env = dict(os.environ if env is None else env)
        self.database = database  # what the children get as SBROKER_DATABASE
        self._popen = popen
        self.children: dict[str, list[subprocess.Popen[bytes]]] = {}
        self.stats = ActivatorStats()
        self._terminating: set[int] = set()

    def running(self, queue: str | None = None) -> int:
        """Children alive now (for one queue, or all)."""
        self.reap()
        return sum(len(v) for q, v in self.children.items() if queue in (None, q))

    def reap(self) -> None:
        """Collect children that exited, logging how."""
        for queue, procs in self.children.items():
            for proc in list(procs):
                code = proc.poll()
                if code is None:
                    continue
                procs.remove(proc)
                if proc.pid in self._terminating:
                    self.stats.terminated += 1
                    log.info("activated process terminated", extra={
                        "queue": queue, "pid": proc.pid, "exit_code": code})
                elif code == 0:
                    self.stats.exited_ok += 1
                    log.info("activated process exited", extra={"queue": queue, "pid": proc.pid})
                else:
                    self.stats.failed += 1
                    log.error("activated process %d for queue %s failed with exit code %s",
                              proc.pid, queue, code, extra={
                        "queue": queue, "pid": proc.pid, "exit_code": code})

    def poll_once(self, timeout: float = 0) -> int:
        """Receive pending notifications (waiting up to ``timeout`` s); processes started."""
        self.reap()
        wanted: list[str] = []
        with self.broker.transaction() as tx:
            for msg in tx.receive(self.notification_queue, timeout=timeout):
                if msg.message_type_name == m.EVENT_NOTIFICATION:
                    fields = events.parse_event_instance(msg.message_body)
                    if fields.get("EventType") == events.QUEUE_ACTIVATION:
                        wanted.append(fields.get("QueueName", ""))
                elif msg.message_type_name in (m.END_DIALOG, m.ERROR):
                    tx.end_conversation(msg.conversation_handle)
        return sum(self._activate(queue) for queue in wanted)

    def _activate(self, queue: str) -> int:
        argv = self.commands.get(queue) or self.commands.get(ANY_QUEUE)
        procs = self.children.setdefault(queue, [])
        if argv is None or len(procs) >= self.max_per_queue:
            self.stats.ignored += 1
            log.info("activation not needed", extra={
                "queue": queue, "running": len(procs), "configured": argv is not None})
            return 0
        env = dict(self.env, SBROKER_DATABASE=self.database, SBROKER_QUEUE=queue)
        proc = self._popen(argv, env=env)
        procs.append(proc)
        self.stats.started += 1
        self.stats.peak[queue] = max(self.stats.peak.get(queue, 0), len(procs))
        log.info("activated process started", extra={
            "queue": queue, "pid": proc.pid, "argv": argv})
        return 1

    def run(self, stop: threading.Event, *, poll_seconds: float = 1.0) -> None:
        """Loop until ``stop`` is set."""
        while not stop.is_set():
            try:
                self.poll_once(timeout=poll_seconds)
            except Exception:
                log.exception("activator pass failed")
                stop.wait(poll_seconds)

    def terminate(self, timeout: float = 10.0) -> None:
        """Ask every child to stop (SIGTERM), then kill those still alive after ``timeout``."""
        procs = [p for ps in self.children.values() for p in ps if p.poll() is None]
        for proc in procs:
            self._terminating.add(proc.pid)
            with contextlib.suppress(OSError):
                proc.terminate()
        end = SYSTEM_CLOCK.monotonic() + timeout  # real time on purpose: processes exit in it
        for proc in procs:
            try:
                proc.wait(max(0.0, end - SYSTEM_CLOCK.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.reap()


def subscribe(broker: BrokerAPI, notification_queue: str, queues: Sequence[str]) -> None:
    """Create (idempotently) the notification queue/service and a QUEUE_ACTIVATION event
    notification named ``sbroker-activator:<queue>`` for each queue."""
    cat = broker.catalog
    with contextlib.suppress(DuplicateError):
        if notification_queue not in cat.queues:
            broker.create_queue(notification_queue, poison_message_handling=False)
    with contextlib.suppress(DuplicateError):
        if notification_queue not in cat.services:
            broker.create_service(notification_queue, notification_queue,
                                  [m.POST_EVENT_NOTIFICATION])
    existing = {name for name, _, _, _ in cat.notifications}
    for queue in queues:
        name = f"sbroker-activator:{queue}"
        if name not in existing:
            broker.create_event_notification(
                name, queue, events.QUEUE_ACTIVATION, notification_queue)
