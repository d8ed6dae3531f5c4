"""The administrator's actions (each a POST of the dashboard): re-enable a queue, re-drive
poison messages, cancel a scheduler task or a pipeline run, end a conversation with cleanup.

Re-driving many messages sends each in a transaction of its own (``sbroker.poison.redrive``
marks the record re-driven and sends its message in one commit): an action cut off half way
has re-driven some messages and left the others parked, never lost or sent one twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sbroker.apps import poison
from sbroker.apps.dashboard.reader import BadRequest, Reader, queue_status
from sbroker.apps.pipeline.control import cancel_run as cancel_pipeline_run
from sbroker.apps.pipeline.parser import PipelineError
from sbroker.apps.scheduler import cancel_task
from sbroker.core.errors import BrokerError, ConversationNotFoundError
from sbroker.engine.api import BrokerAPI

SHOWN_POISON = 500  # poison records listed on the page at most


@dataclass
class Redrive:
    """What a re-drive did: record ids sent again, and (record id, why) for the others."""

    sent: list[int] = field(default_factory=list)
    failed: list[tuple[int, str]] = field(default_factory=list)

    def summary(self) -> str:
        text = f"re-drove {len(self.sent)} message(s)"
        if self.failed:
            first = self.failed[0]
            text += (f"; {len(self.failed)} could not be re-driven (record {first[0]}: "
                     f"{first[1]})")
        return text


def redrivable(broker: BrokerAPI) -> list[dict[str, Any]]:
    """Poison records that can be sent again (logged, notified, parked), oldest first."""
    return [r for r in poison.list_messages(broker) if r["state"] in poison.REDRIVABLE]


def poison_page(broker: BrokerAPI, reader: Reader) -> dict[str, Any]:
    """Disabled queues and the messages poison handling took out of their queues."""
    records = redrivable(broker)
    return {
        "disabled": [q for q in reader.queues() if q["status"] != "enabled"],
        "records": records[:SHOWN_POISON],
        "record_count": len(records),
    }


def enable_queue(reader: Reader, name: str) -> str:
    """Re-enable a queue (a poisoned one starts counting rollbacks from zero again)."""
    queue = reader.queue(name)
    reader.broker.alter_queue(name, status=True)
    was = queue_status(queue)
    return f"queue {name} enabled" + ("" if was == "enabled" else f" (was {was})")


def record_ids(values: Iterable[object]) -> list[int]:
    """The checked record ids of a form."""
    ids = []
    for value in values:
        if not isinstance(value, str) or not value.isdigit():
            raise BadRequest(f"record ids are whole numbers, got {value!r}")
        ids.append(int(value))
    return ids


def redrive(broker: BrokerAPI, ids: list[int] | None) -> Redrive:
    """Re-drive the given records (all redrivable ones for None), one per transaction."""
    if ids is None:
        ids = [int(r["record_id"]) for r in redrivable(broker)]
    elif not ids:
        raise BadRequest("select at least one message to re-drive, or use 're-drive all'")
    done = Redrive()
    for record_id in ids:
        try:
            poison.redrive(broker, record_id)
        except BrokerError as exc:
            done.failed.append((record_id, str(exc)))
        else:
            done.sent.append(record_id)
    return done


def cancel(broker: BrokerAPI, log_id: int) -> str:
    """Ask the executor to cancel a queued or running task."""
    if cancel_task(broker, log_id):
        return f"task {log_id}: cancel requested"
    raise BadRequest(f"task {log_id} is not queued or running: nothing to cancel", 409)


def cancel_run(broker: BrokerAPI, run_id: int) -> str:
    """Cancel a pipeline run, as `sbroker runs cancel` does."""
    try:
        return cancel_pipeline_run(broker, run_id)
    except PipelineError as exc:
        raise BadRequest(str(exc), 409) from None


def end_conversation(broker: BrokerAPI, handle: str) -> str:
    """END CONVERSATION ... WITH CLEANUP: the local endpoint and its messages go, silently."""
    try:
        with broker.transaction() as tx:
            tx.end_conversation(handle, cleanup=True)
    except ConversationNotFoundError:
        raise BadRequest(f"no conversation with handle {handle!r}", 404) from None
    return f"conversation {handle} ended with cleanup"
