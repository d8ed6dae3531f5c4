"""Event notifications (docs/concepts.md, docs/activation.md, docs/poison.md): QUEUE_ACTIVATION
and BROKER_QUEUE_DISABLED, sent as ``EventNotification`` messages with an XML ``EVENT_INSTANCE``
body over the built-in ``PostEventNotification`` contract to each subscription's ``to_service``.

The initiator is a hidden built-in service (and queue) ``sbroker/EventNotificationSender``,
created on first use.  As in SQL Server, one dialog per subscription carries all its events:
its handle is kept in ``sb_shared_dialogs``; when the target ends that dialog (or it errors),
the EndDialog/Error reply in the sender's queue ends our side too and the next event begins
a new dialog, so nothing piles up.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterable
from datetime import UTC, datetime
from xml.etree import ElementTree as ET

from sbroker.core import messages as m
from sbroker.core.errors import DuplicateError
from sbroker.engine import catalog
from sbroker.engine.api import EngineAPI
from sbroker.engine.shared import send_shared

log = logging.getLogger("sbroker.events")
SENDER = "sbroker/EventNotificationSender"
QUEUE_ACTIVATION = "QUEUE_ACTIVATION"
BROKER_QUEUE_DISABLED = "BROKER_QUEUE_DISABLED"


def event_instance(event_type: str, *, post_time: float, database_name: str, queue_name: str,
                   broker_instance: str) -> bytes:
    """The XML ``EVENT_INSTANCE`` body SQL Server sends for a queue event."""
    root = ET.Element("EVENT_INSTANCE")
    stamp = datetime.fromtimestamp(post_time, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    for tag, value in (
        ("EventType", event_type), ("PostTime", stamp), ("SPID", str(os.getpid())),
        ("ServerName", socket.gethostname()), ("LoginName", ""), ("UserName", "dbo"),
        ("DatabaseName", database_name), ("SchemaName", "dbo"), ("ObjectName", queue_name),
        ("ObjectType", "QUEUE"), ("QueueName", queue_name), ("BrokerInstance", broker_instance),
    ):
        ET.SubElement(root, tag).text = value
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=False))


def parse_event_instance(body: bytes | str) -> dict[str, str]:
    """The fields of an ``EVENT_INSTANCE`` body as a dict (EventType, QueueName, ...)."""
    root = ET.fromstring(body)
    return {child.tag: child.text or "" for child in root}


def ensure_service(engine: EngineAPI, name: str, contracts: Iterable[str] = ()) -> None:
    """Create (idempotently, race-safe) a queue and a service both called ``name``."""
    cat = engine.catalog()
    if name in cat.services:
        return
    if name not in cat.queues:
        with contextlib.suppress(DuplicateError):
            engine.ddl(catalog.create_queue(name, {"poison_message_handling": False}))
            engine.listeners.altered(name)
    with contextlib.suppress(DuplicateError):
        engine.ddl(catalog.create_service(name, name, tuple(contracts)), redeliver=True)


def prepare_sender(engine: EngineAPI, service: str) -> None:
    """Everything :func:`send_shared` needs, created before any transaction holds a lock."""
    ensure_service(engine, service)


def create_notification_target(engine: EngineAPI, service: str) -> None:
    """A queue and service (both ``service``) that accept event notifications."""
    ensure_service(engine, service, (m.POST_EVENT_NOTIFICATION,))


def shared_send(engine: EngineAPI, *, key: str, from_service: str, to_service: str,
                contract: str, message_type: str, body: bytes) -> str:
    """:func:`send_shared` in a transaction of its own; the dialog's handle."""
    with engine.transaction() as tx:
        return send_shared(engine, tx, key=key, from_service=from_service,
                           to_service=to_service, contract=contract,
                           message_type=message_type, body=body)


def post_event(engine: EngineAPI, queue_name: str, event_type: str) -> int:
    """Send ``event_type`` for ``queue_name`` to every subscription; how many were sent."""
    cat = engine.catalog()
    queue = cat.queue(queue_name)
    subs = [(name, service) for name, qid, event, service in cat.notifications
            if qid == queue.queue_id and event == event_type]
    if not subs:
        return 0
    prepare_sender(engine, SENDER)
    body = event_instance(
        event_type, post_time=engine.clock.now(), database_name=engine.store.location,
        queue_name=queue_name, broker_instance=engine.broker_instance,
    )
    sent = 0
    for name, service in subs:
        try:
            shared_send(engine, key=f"event:{name}", from_service=SENDER, to_service=service,
                        contract=m.POST_EVENT_NOTIFICATION, message_type=m.EVENT_NOTIFICATION,
                        body=body)
        except Exception:
            log.exception("event notification failed", extra={
                "notification": name, "event": event_type, "queue": queue_name})
            continue
        sent += 1
        log.info("event notification sent", extra={
            "notification": name, "event": event_type, "queue": queue_name,
            "to_service": service})
    return sent


__all__ = ["BROKER_QUEUE_DISABLED", "QUEUE_ACTIVATION", "SENDER", "create_notification_target",
           "ensure_service", "event_instance", "parse_event_instance", "post_event",
           "prepare_sender", "send_shared", "shared_send"]
