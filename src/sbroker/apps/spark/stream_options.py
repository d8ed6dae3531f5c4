"""The options of the ``sbroker`` data source (docs/stream.md), checked into typed values, and
the broker each Spark Python process opens once per URL. Imports no pyspark."""

from __future__ import annotations

import atexit
import functools
import json
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from sbroker.core.errors import BrokerError, InvalidArgumentError
from sbroker.engine import streams

NAME = "sbroker"
DEFAULT_MAX_MESSAGES = 10_000
DEFAULT_PER_PARTITION = 50_000  # Spark's Python worker has a fixed cost per task: few, big
SOURCE_OPTIONS = ("url", "queue", "maxMessagesPerBatch", "messagesPerPartition",
                  "claimTimeout")
SINK_OPTIONS = ("url", "from_service", "to_service", "contract", "message_type")
SPARK_OPTIONS = ("checkpointLocation", "path", "queryName")  # Spark passes these on
_KNOWN = {name.lower(): name for name in (*SOURCE_OPTIONS, *SINK_OPTIONS, *SPARK_OPTIONS)}
F = TypeVar("F", bound=Callable[..., Any])


def one_line(fn: F) -> F:
    """Let an sbroker error raised by ``fn`` in a Spark Python worker reach the user as its
    one line, without the worker's traceback: Spark formats the traceback from the variable
    below when the worker reports the error (the process ends right after). Bugs keep it."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BrokerError:
            if "PYTHON_WORKER_FACTORY_SECRET" in os.environ:  # in a worker Spark started
                os.environ["SPARK_HIDE_TRACEBACK"] = "1"
            raise

    return wrapper  # type: ignore[return-value]


def _lowered(options: Mapping[str, str]) -> dict[str, str]:
    found = {str(k).lower(): str(v) for k, v in options.items()}
    unknown = sorted(k for k in found if k not in _KNOWN)
    if unknown:
        raise InvalidArgumentError(
            f"unknown option {unknown[0]!r} for format 'sbroker': a source takes "
            f"{', '.join(SOURCE_OPTIONS)}; a sink takes {', '.join(SINK_OPTIONS)}")
    return found


def _required(found: dict[str, str], name: str, what: str) -> str:
    value = found.get(name.lower(), "")
    if not value:
        raise InvalidArgumentError(
            f"the {what} needs option {name!r}: .option({name!r}, ...)")
    return value


def _count(found: dict[str, str], name: str, default: int) -> int:
    text = found.get(name.lower())
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise InvalidArgumentError(f"option {name!r} must be a whole number >= 1, got {text!r}")
    return value


@dataclass(frozen=True)
class SourceOptions:
    """A queue read by a stream (or looked at by a batch read)."""

    url: str
    queue: str
    max_messages: int = DEFAULT_MAX_MESSAGES
    per_partition: int = DEFAULT_PER_PARTITION
    claim_wait: float = streams.CLAIM_WAIT

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        found = _lowered(options)
        wait_text = found.get("claimtimeout", str(streams.CLAIM_WAIT))
        try:
            wait = float(wait_text)
        except ValueError:
            wait = -1.0
        if not wait >= 0:
            raise InvalidArgumentError(
                f"option 'claimTimeout' is seconds >= 0, got {wait_text!r}")
        return cls(_required(found, "url", "sbroker source"),
                   _required(found, "queue", "sbroker source"),
                   _count(found, "maxMessagesPerBatch", DEFAULT_MAX_MESSAGES),
                   _count(found, "messagesPerPartition", DEFAULT_PER_PARTITION), wait)

    def offset(self, position: int) -> dict[str, Any]:
        """Spark's offset for a queue position (keys in a fixed order: Spark compares the
        JSON text)."""
        return {"queue": self.queue, "queuing_order": position}

    def position(self, offset: Mapping[str, Any]) -> int:
        """The queue position of one of this source's offsets."""
        if offset.get("queue") != self.queue or not isinstance(
                offset.get("queuing_order"), int):
            raise InvalidArgumentError(
                f"the checkpoint holds offset {json.dumps(dict(offset))}, not one of queue "
                f"{self.queue!r}: give this query a checkpoint of its own")
        return int(offset["queuing_order"])


@dataclass(frozen=True)
class SinkOptions:
    """Where a sink sends."""

    url: str
    target: streams.SinkTarget

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        found = _lowered(options)
        return cls(_required(found, "url", "sbroker sink"), streams.SinkTarget(
            _required(found, "from_service", "sbroker sink"),
            _required(found, "to_service", "sbroker sink"),
            found.get("contract") or "DEFAULT", found.get("message_type") or "DEFAULT"))


_brokers: dict[str, Any] = {}
_brokers_lock = threading.Lock()


def broker_for(url: str) -> Any:
    """This process's broker on ``url``, opened on first use (Spark reuses its Python
    workers: one open per worker, not one per task) and closed when the process exits."""
    with _brokers_lock:
        broker = _brokers.get(url)
        if broker is None:
            broker = _brokers[url] = streams.open_broker(url)
            if len(_brokers) == 1:
                atexit.register(close_brokers)
        return broker


def close_brokers() -> None:
    """Close the brokers this process opened (their sessions, and any claim, go with them)."""
    with _brokers_lock:
        opened = list(_brokers.values())
        _brokers.clear()
    for broker in opened:
        broker.close()
