"""Helpers for the engine tier: threads that must finish, and child processes driven by lines.

Nothing here sleeps to wait for something to happen: threads are joined with a generous
deadline, and child processes are followed line by line through their stdout.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sbroker
from sbroker.storage.migrate import statements
from sbroker.storage.sqlite.connector import APPLICATION_ID, MIGRATIONS

CHILD = Path(__file__).with_name("child.py")
DEADLINE = 60.0  # seconds: generous, a loaded 2-core machine must never hit it


def poll_until(condition: Callable[[], object], timeout: float = DEADLINE) -> None:
    """For what only polling can tell (Spark's job states): look every 50 ms, waiting on an
    event in between; fails after ``timeout`` seconds."""
    tick = threading.Event()
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        tick.wait(0.05)


def make_pair(b: sbroker.Broker, *, poison_message_handling: bool = True) -> sbroker.Broker:
    """InitQueue/InitService and TargetQueue/TargetService (DEFAULT contract)."""
    b.create_queue("InitQueue")
    b.create_queue("TargetQueue", poison_message_handling=poison_message_handling)
    b.create_service("InitService", "InitQueue")
    b.create_service("TargetService", "TargetQueue", ["DEFAULT"])
    return b


def begin_and_send(b: sbroker.Broker, *bodies: str) -> str:
    """A new dialog InitService -> TargetService carrying ``bodies``; its initiator handle."""
    with b.transaction() as tx:
        handle = tx.begin_dialog("InitService", "TargetService")
        for body in bodies:
            tx.send(handle, body=body)
    return handle


def send(b: sbroker.Broker, handle: str, *bodies: str) -> None:
    with b.transaction() as tx:
        for body in bodies:
            tx.send(handle, body=body)


def drain(b: sbroker.Broker, queue: str) -> list[sbroker.Message]:
    """Every message of ``queue``, received group by group, each RECEIVE its own commit."""
    got: list[sbroker.Message] = []
    while True:
        with b.transaction() as tx:
            batch = tx.receive(queue)
        if not batch:
            return got
        got += batch


def bodies(messages: list[sbroker.Message]) -> list[str]:
    return [m.text() for m in messages]


def table_counts(b: sbroker.Broker) -> dict[str, int]:
    """Row counts of the engine's per-conversation tables (what must not accumulate)."""
    # Group locks are rows on SQLite, advisory locks (seen through a view) on PostgreSQL.
    locks = "sb_group_locks" if b.dialect == "sqlite" else "sb_held_groups"
    tables = {t: t for t in ("sb_endpoints", "sb_messages", "sb_transmission_queue")}
    with b.db.connection() as conn:
        return {
            name: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for name, t in {**tables, "sb_group_locks": locks}.items()
        }


def on_hook(b: sbroker.Broker, hook: str, queue: str) -> threading.Event:
    """An event set when the engine calls ``b.hooks.<hook>`` for ``queue``: ``waiting``
    (an unfiltered RECEIVE starts to wait) or ``arrived`` (a commit made messages ready)."""
    queue_id = b.catalog.queue(queue).queue_id
    event = threading.Event()
    original = getattr(b.hooks, hook)

    def spy(first: Any, *args: Any) -> None:
        original(first, *args)
        if queue_id in ([first] if hook == "waiting" else list(first)) and (
                hook != "waiting" or args[0] > 0):
            event.set()

    setattr(b.hooks, hook, spy)
    return event


class Background:
    """Run ``fn`` in a thread; :meth:`result` joins it with a deadline and re-raises."""

    def __init__(self, fn: Callable[[], Any], name: str = "background") -> None:
        self._fn = fn
        self._result: Any = None
        self._error: BaseException | None = None
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._result = self._fn()
        except BaseException as exc:
            self._error = exc
        finally:
            self.done.set()

    def result(self, timeout: float = DEADLINE) -> Any:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self._thread.name} did not finish in {timeout}s"
        if self._error is not None:
            raise self._error
        return self._result


class Holder:
    """A transaction in another thread that runs ``body(tx)``, then parks inside the
    ``with`` block until released: it holds whatever group locks ``body`` took."""

    def __init__(self, b: sbroker.Broker, body: Callable[[sbroker.Transaction], Any],
                 *, commit: bool = True) -> None:
        self.holding = threading.Event()
        self.release = threading.Event()
        self.value: Any = None
        self._commit = commit

        def run() -> Any:
            with b.transaction() as tx:
                self.value = body(tx)
                self.holding.set()
                assert self.release.wait(DEADLINE), "holder was never released"
                if not self._commit:
                    tx.rollback()
            return self.value

        self._bg = Background(run, "holder")
        if not self.holding.wait(DEADLINE):
            self._bg.result(0)  # surfaces the error that stopped it
            raise AssertionError("holder never got to hold")

    @property
    def finished(self) -> bool:
        return self._bg.done.is_set()

    def finish(self, *, commit: bool = True) -> Any:
        self._commit = commit
        self.release.set()
        return self._bg.result()


class Child:
    """A helper process (``child.py``) on the same database file, driven line by line."""

    def __init__(self, *args: object, durability: str = "normal",
                 monitor_interval: float = 5.0, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), *map(str, args)],
            env={**os.environ, "SBROKER_DURABILITY": durability,
                 "SBROKER_MONITOR": str(monitor_interval), **(env or {})},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, bufsize=1,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.seen: list[str] = []

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                self._lines.put(line.rstrip("\n"))
        except (OSError, ValueError):
            pass
        finally:
            self._lines.put(None)

    def expect(self, word: str, timeout: float = DEADLINE) -> Any:
        """Wait for a line ``word <json>``; return the decoded JSON payload."""
        while True:
            try:
                line = self._lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"child did not say {word!r} within {timeout}s; "
                                     f"it said {self.seen[-5:]}") from None
            if line is None:
                raise AssertionError(
                    f"child ended (rc={self.proc.wait()}) before saying {word!r}; "
                    f"it said {self.seen[-5:]}; stderr: {self.stderr()}"
                )
            self.seen.append(line)
            head, _, payload = line.partition(" ")
            if head == word:
                return json.loads(payload) if payload else None

    def rest(self, word: str, timeout: float = DEADLINE) -> list[Any]:
        """After the child ended: the payloads of every ``word`` line it still wrote."""
        out = []
        while (line := self._lines.get(timeout=timeout)) is not None:
            self.seen.append(line)
            head, _, payload = line.partition(" ")
            if head == word:
                out.append(json.loads(payload) if payload else None)
        return out

    def tell(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(DEADLINE) == -signal.SIGKILL

    def finish(self, timeout: float = DEADLINE) -> int:
        """Close stdin and wait for the child to exit; its return code."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.proc.wait(timeout)

    def stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return "(running)"
        return self.proc.stderr.read()[-2000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(DEADLINE)
        self._reader.join(DEADLINE)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def database_at(path: Path, version: int) -> None:
    """A file as a release with only the first ``version`` migrations left it."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    for migration in MIGRATIONS[:version]:
        for statement in statements(migration.text, sqlite3.complete_statement):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("INSERT INTO sb_meta(key, value) VALUES ('broker_instance', ?),"
                 " ('catalog_version', '0'), ('honor_broker_priority', '0')",
                 (str(uuid.uuid4()).upper(),))
    # One conversation with a message waiting in the target queue (schema 1's columns).
    conn.execute("INSERT INTO sb_queues(queue_id, name) VALUES (1, 'I'), (2, 'T')")
    conn.execute("INSERT INTO sb_services(service_id, name, queue_id) VALUES (1, 'IS', 1),"
                 " (2, 'TS', 2)")
    conn.execute("INSERT INTO sb_service_contracts VALUES (2, 'DEFAULT')")
    for order, (handle, initiator, group, queue_id, service, far) in enumerate([
            ("A" * 8 + "-0000-0000-0000-" + "0" * 12, 1, "G1", 1, "IS", "TS"),
            ("B" * 8 + "-0000-0000-0000-" + "0" * 12, 0, "G2", 2, "TS", "IS")], start=1):
        conn.execute(
            "INSERT INTO sb_endpoints(conv_order, handle, conversation_id, is_initiator,"
            " group_id, queue_id, service, far_service, contract, state, priority, send_seq,"
            " receive_seq, lifetime_expires, created_at) VALUES"
            " (?, ?, 'C', ?, ?, ?, ?, ?, 'DEFAULT', 'CO', 5, ?, ?, 9e18, 0)",
            (order, handle, initiator, group, queue_id, service, far, initiator, 1 - initiator))
    # From migration 10 a queue row names its group by number: the conv_order of the
    # endpoint that first named it (here the target, 2).
    group = ("group_id", "'G2'") if version < 10 else ("group_key", "2")
    conn.execute(
        f"INSERT INTO sb_messages(queue_id, {group[0]}, handle, conv_order, msn, status,"
        " priority, message_type, validation, body, message_id, service, contract) VALUES"
        f" (2, {group[1]}, ?, 2, 0, 1, 5, 'DEFAULT', 'N', x'6b657074', 'M', 'TS', 'DEFAULT')",
        ("B" * 8 + "-0000-0000-0000-" + "0" * 12,))
    conn.execute("COMMIT")
    conn.close()
