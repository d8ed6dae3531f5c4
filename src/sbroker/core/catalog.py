"""Catalog objects as data (docs/concepts.md): message types, contracts, queues, services,
routes, priorities, event notifications, and the snapshot of all of them at one catalog
version."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sbroker.core import messages as m
from sbroker.core.errors import InvalidArgumentError, NotFoundError
from sbroker.core.priority import BrokerPriority

SENT_BY = ("initiator", "target", "any")
EVENTS = ("QUEUE_ACTIVATION", "BROKER_QUEUE_DISABLED")
BUILTIN_MESSAGE_TYPES = frozenset({m.DEFAULT, *m.SYSTEM_MESSAGE_TYPES, m.EVENT_NOTIFICATION})
BUILTIN_CONTRACTS = frozenset({m.DEFAULT, m.POST_EVENT_NOTIFICATION})


@dataclass(frozen=True)
class Activation:
    """Internal activation of a queue: ``procedure`` is a callable or ``"package.module:func"``."""

    procedure: Callable[..., Any] | str
    max_queue_readers: int = 1
    status: bool = True
    execute_as: str | None = None

    def __post_init__(self) -> None:
        if not callable(self.procedure) and not (
            isinstance(self.procedure, str) and ":" in self.procedure
        ):
            raise InvalidArgumentError(
                "Activation.procedure must be a callable or an import path 'package.module:func'"
            )
        if not isinstance(self.max_queue_readers, int) or not 0 <= self.max_queue_readers <= 32767:
            raise InvalidArgumentError("max_queue_readers must be an int from 0 to 32767")

    @property
    def procedure_name(self) -> str:
        if isinstance(self.procedure, str):
            return self.procedure
        mod = getattr(self.procedure, "__module__", "?")
        return f"{mod}:{getattr(self.procedure, '__qualname__', repr(self.procedure))}"


@dataclass(frozen=True)
class MessageType:
    name: str
    kind: str
    validation_code: str
    check: Callable[[bytes], str | None]


@dataclass(frozen=True)
class Queue:
    queue_id: int
    name: str
    status: bool
    retention: bool
    activation_defined: bool
    activation_status: bool
    activation_procedure: str | None
    max_queue_readers: int
    execute_as: str | None
    poison_message_handling: bool


@dataclass(frozen=True)
class Service:
    service_id: int
    name: str
    queue_id: int
    contracts: frozenset[str]


@dataclass(frozen=True)
class Route:
    name: str
    service_name: str | None
    broker_instance: str | None
    address: str
    expires_at: float | None


@dataclass
class Catalog:
    """A consistent snapshot of the catalog tables at one ``catalog_version``."""

    version: str
    broker_instance: str
    honor_broker_priority: bool
    message_types: dict[str, MessageType] = field(default_factory=dict)
    contracts: dict[str, dict[str, str]] = field(default_factory=dict)
    queues: dict[str, Queue] = field(default_factory=dict)
    queues_by_id: dict[int, Queue] = field(default_factory=dict)
    services: dict[str, Service] = field(default_factory=dict)
    routes: list[Route] = field(default_factory=list)
    priorities: list[BrokerPriority] = field(default_factory=list)
    notifications: list[tuple[str, int, str, str]] = field(default_factory=list)

    def queue(self, name: str) -> Queue:
        try:
            return self.queues[name]
        except KeyError:
            raise NotFoundError(f"queue {name!r} does not exist") from None

    def service(self, name: str) -> Service:
        try:
            return self.services[name]
        except KeyError:
            raise NotFoundError(f"service {name!r} does not exist") from None

    def contract(self, name: str) -> dict[str, str]:
        try:
            return self.contracts[name]
        except KeyError:
            raise NotFoundError(f"contract {name!r} does not exist") from None


def check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgumentError(f"{what} name must be a non-empty string, got {name!r}")
    if len(name) > 256:
        raise InvalidArgumentError(f"{what} name is longer than 256 characters: {name[:40]!r}...")
    return name
