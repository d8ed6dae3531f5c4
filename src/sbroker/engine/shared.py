"""SEND on a shared dialog: one dialog per key carries a stream of notices (event
notifications, poison alerts), begun on first use and begun again when the far side ends it.

It works through the statements of a transaction (the :class:`SharedTx` protocol), so the
transaction can offer it as a method without this module importing the transaction."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from sbroker.core import messages as m
from sbroker.core.catalog import Catalog
from sbroker.storage.ports import Connection, Store

log = logging.getLogger("sbroker.events")
_LIVE_STATES = ("SO", "SI", "CO")
_MAX_REPLIES = 1000  # replies reaped per send, at most


class Fetch(Protocol):
    def fetchone(self) -> Any: ...


class SharedTx(Protocol):
    """The statements of a broker transaction a shared send uses."""

    def receive(self, queue: str) -> list[m.Message]: ...

    def execute(self, sql: str, params: Sequence[Any] = ...) -> Fetch: ...

    def end_conversation(self, handle: str) -> None: ...

    def begin_dialog(self, from_service: str, to_service: str, contract: str) -> str: ...

    def send(self, handle: str, message_type: str, body: bytes) -> None: ...


class SharedHost(Protocol):
    """What a shared send reads of the engine: its store's SQL and the catalog."""

    @property
    def store(self) -> Store: ...

    def catalog(self, conn: Connection | None = None, *, max_age: float = 0.0) -> Catalog: ...


def _reap_replies(host: SharedHost, tx: SharedTx, queue: str) -> None:
    """End our side of shared dialogs the far side ended (EndDialog / Error replies)."""
    for _ in range(_MAX_REPLIES):
        msgs = tx.receive(queue)
        if not msgs:
            return
        for msg in msgs:
            if msg.message_type_name in (m.END_DIALOG, m.ERROR):
                if msg.is_error:
                    error = msg.error()
                    log.warning("shared dialog %s failed: error %s: %s",
                                msg.conversation_handle, *error, extra={
                        "handle": msg.conversation_handle, "error": error})
                tx.execute(host.store.sql.forget_shared_dialog, (msg.conversation_handle,))
                tx.end_conversation(msg.conversation_handle)
            else:
                log.warning("unexpected reply of type %s on shared dialog %s dropped",
                            msg.message_type_name, msg.conversation_handle, extra={
                    "handle": msg.conversation_handle, "type": msg.message_type_name})


def send_shared(host: SharedHost, tx: SharedTx, *, key: str, from_service: str,
                to_service: str, contract: str, message_type: str, body: bytes) -> str:
    """Inside ``tx``: send on the live dialog kept under ``key`` (beginning one if needed).

    ``from_service`` must exist already (DDL cannot run while ``tx`` holds the write lock).
    """
    sql = host.store.sql
    cat = host.catalog()
    queue = cat.queues_by_id[cat.service(from_service).queue_id].name
    # A write first: it takes the write lock, so concurrent senders on one key serialize.
    tx.execute(sql.lock_shared_dialog, (key,))
    _reap_replies(host, tx, queue)
    row = tx.execute(sql.shared_dialog, (key,)).fetchone()
    handle: str | None = row[0] if row else None
    if handle is not None:
        state = tx.execute(sql.endpoint_state, (handle,)).fetchone()
        if state is None or state[0] not in _LIVE_STATES:
            handle = None
    if handle is None:
        handle = tx.begin_dialog(from_service, to_service, contract)
        tx.execute(sql.save_shared_dialog, (key, handle))
    tx.send(handle, message_type, body)
    return handle
