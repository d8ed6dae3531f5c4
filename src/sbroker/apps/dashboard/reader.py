"""What the dashboard shows, read through the broker's public API: views, ``peek`` and
read-only statements (the named blocks of ``<dialect>.sql``) in broker transactions.

Every list a page shows is a page: queues are peeked ``PAGE_SIZE`` messages at a time, the
transmission queue and the ExecutionLog are read with LIMIT/OFFSET.  Bad input raises
:class:`BadRequest` (a 4xx page), never reaches SQL as text.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sbroker.apps.scheduler.schema import TARGET_SERVICE as EXECUTOR_SERVICE
from sbroker.core.catalog import Catalog
from sbroker.core.clock import Clock
from sbroker.core.errors import BrokerError
from sbroker.core.messages import Message
from sbroker.storage import queries

PAGE_SIZE = 50
POISON_THRESHOLD = 5  # rollbacks that disable a queue (docs/poison.md)
STATES = {"SO": "STARTED_OUTBOUND", "SI": "STARTED_INBOUND", "CO": "CONVERSING",
          "DI": "DISCONNECTED_INBOUND", "DO": "DISCONNECTED_OUTBOUND", "ER": "ERROR",
          "CD": "CLOSED"}
TASK_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
API_VIEWS = (
    "conversation_endpoints", "conversation_groups", "transmission_queue", "service_queues",
    "services", "contracts", "message_types", "routes", "conversation_priorities",
    "dm_broker_queue_monitors", "dm_broker_activated_tasks", "dm_broker_connections",
    "queue_stats", "ExecutionLog", "ExecutionStatus",
)


class BrokerApi(Protocol):
    """The part of ``sbroker.Broker`` the dashboard uses."""

    clock: Clock

    @property
    def dialect(self) -> str: ...

    @property
    def catalog(self) -> Catalog: ...

    def view(self, name: str) -> list[dict[str, Any]]: ...

    def peek(self, queue: str, *, top: int | None = None, offset: int = 0) -> list[Message]: ...

    def transaction(self) -> Any: ...

    def alter_queue(self, name: str, **options: Any) -> None: ...


class BadRequest(Exception):
    """Input the dashboard cannot use: shown as a 4xx page with this one-line message."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Page:
    """One page of a longer list."""

    rows: list[Any]
    number: int
    total: int
    size: int = PAGE_SIZE

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size))

    @property
    def has_next(self) -> bool:
        return self.number < self.pages


def page_number(value: str | None) -> int:
    """The ``page`` query parameter: an int >= 1."""
    if value is None or value == "":
        return 1
    if not value.isdigit() or int(value) < 1:
        raise BadRequest(f"page must be a whole number >= 1, got {value!r}")
    return int(value)


def parse_time(value: str | None, name: str) -> str | None:
    """An ISO date/time from a filter, as the UTC ISO text ExecutionLog stores."""
    if not value:
        return None
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        raise BadRequest(f"{name} must be an ISO date or time like 2026-11-24T09:30, "
                         f"got {value!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC).isoformat()


def queue_status(row: Mapping[str, Any]) -> str:
    """enabled / disabled by poison / disabled, as an operator reads it."""
    if row["is_enabled"]:
        return "enabled"
    if row["is_poison_message_handling_enabled"] and row["rollback_count"] >= POISON_THRESHOLD:
        return "disabled by poison"
    return "disabled"


class Reader:
    """Reads one broker database for the pages, the JSON API and the metrics."""

    def __init__(self, broker: BrokerApi) -> None:
        self.broker = broker
        self.sql = queries.load("sbroker.apps.dashboard", f"{broker.dialect}.sql")

    # -- plumbing ------------------------------------------------------------------------
    def rows(self, name: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """The rows of a named read-only statement, as dicts."""
        with self.broker.transaction() as tx:
            cur = tx.execute(self.sql[name], dict(params or {}))
            columns = [d[0] for d in cur.description]
            return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]

    def scalar(self, name: str, params: Mapping[str, Any] | None = None) -> int:
        with self.broker.transaction() as tx:
            row = tx.execute(self.sql[name], dict(params or {})).fetchone()
        return int(row[0]) if row else 0

    def scheduler_rows(self, name: str,
                       params: Mapping[str, Any] | None = None) -> list[dict[str, Any]] | None:
        """Rows of a statement on the scheduler's tables; None when the executor is not
        installed (its tables come with every database, its service with install_executor)."""
        if EXECUTOR_SERVICE not in self.broker.catalog.services:
            return None
        try:
            return self.rows(name, params)
        except BrokerError:
            return None

    # -- the overview ----------------------------------------------------------------------
    def queues(self) -> list[dict[str, Any]]:
        """queue_stats with the status in words and the oldest message's age."""
        now = self.broker.clock.now()
        out = []
        for row in self.broker.view("queue_stats"):
            oldest = row["oldest_enqueue_time"]
            out.append({**row, "status": queue_status(row),
                        "oldest_age": None if oldest is None else max(0.0, now - oldest)})
        return out

    def queue(self, name: str) -> dict[str, Any]:
        for row in self.queues():
            if row["queue_name"] == name:
                return row
        raise BadRequest(f"no queue named {name!r}: pick one on the overview page", 404)

    def overview(self) -> dict[str, Any]:
        states = {r["state"]: r["endpoints"] for r in self.rows("conversation_states")}
        return {
            "queues": self.queues(),
            "transmission": self.rows("transmission_summary"),
            "connections": self.broker.view("dm_broker_connections"),
            "conversations": [(code, STATES[code], states.get(code, 0)) for code in STATES],
            "tasks": self.task_counts(),
        }

    def task_counts(self) -> dict[str, int] | None:
        rows = self.scheduler_rows("task_counts")
        if rows is None:
            return None
        counts = dict.fromkeys(TASK_STATUSES, 0)
        counts.update({r["Status"]: r["tasks"] for r in rows})
        return counts

    # -- one queue ---------------------------------------------------------------------------
    def queue_detail(self, name: str, page: int, groups_page: int) -> dict[str, Any]:
        queue = self.queue(name)
        offset = (page - 1) * PAGE_SIZE
        messages = self.broker.peek(name, top=PAGE_SIZE, offset=offset)
        total = queue["ready_messages"] + queue["locked_messages"]
        group_params = {"queue": name, "limit": PAGE_SIZE,
                        "offset": (groups_page - 1) * PAGE_SIZE}
        return {
            "queue": queue,
            "messages": Page(messages, page, max(total, offset + len(messages))),
            "locks": self.rows("group_locks", {"queue": name}),
            "groups": Page(self.rows("groups_page", group_params), groups_page,
                           self.scalar("groups_count", {"queue": name})),
        }

    # -- conversations -------------------------------------------------------------------
    def conversations(self, filters: Mapping[str, str], page: int) -> dict[str, Any]:
        state = filters.get("state") or None
        if state is not None and state not in STATES:
            raise BadRequest(f"state must be one of {', '.join(STATES)}, got {state!r}")
        wanted = {key: filters.get(key) or None
                  for key in ("service_name", "far_service", "queue_name")}
        rows = [
            r for r in self.broker.view("conversation_endpoints")
            if (state is None or r["state"] == state)
            and all(v is None or r[k] == v for k, v in wanted.items())
        ]
        start = (page - 1) * PAGE_SIZE
        return {"page": Page(rows[start:start + PAGE_SIZE], page, len(rows)),
                "states": STATES}

    # -- the transmission queue ------------------------------------------------------------
    def transmission(self, to_service: str | None, page: int) -> dict[str, Any]:
        params = {"to_service": to_service or None}
        rows = self.rows("transmission_page", {
            **params, "limit": PAGE_SIZE, "offset": (page - 1) * PAGE_SIZE})
        return {"summary": self.rows("transmission_summary"),
                "page": Page(rows, page, self.scalar("transmission_count", params))}

    # -- the JSON API ----------------------------------------------------------------------
    def view(self, name: str) -> list[dict[str, Any]]:
        if name not in API_VIEWS:
            raise BadRequest(f"no view named {name!r}: use one of {', '.join(API_VIEWS)}", 404)
        try:
            return self.broker.view(name)
        except BrokerError as exc:  # ExecutionLog before install_executor
            raise BadRequest(f"view {name!r} is not available: {exc}", 404) from None
