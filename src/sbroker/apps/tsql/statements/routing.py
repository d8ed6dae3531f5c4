"""Where messages go and in which order: CREATE / ALTER / DROP ROUTE and BROKER PRIORITY.
ALTER changes the options it names; the others stay as they were (as in SQL Server)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sbroker.apps.tsql.errors import NOT_FOUND, TSqlError
from sbroker.apps.tsql.ports import TSqlBroker
from sbroker.apps.tsql.session import Frame
from sbroker.apps.tsql.statement import Head, Parser, Statement, statement
from sbroker.apps.tsql.statements.catalog import Drop
from sbroker.apps.tsql.statements.options import authorization, options, values


def _address(address: str) -> str:
    """A route's ADDRESS as SQL Server reads it: 'TCP://host:port', 'LOCAL' and 'TRANSPORT'
    in any case."""
    if address.upper() in ("LOCAL", "TRANSPORT"):
        return address.upper()
    if address[:6].lower() == "tcp://":
        return "tcp://" + address[6:]
    return address


@statement("CREATE ROUTE")
@dataclass(frozen=True)
class CreateRoute(Statement):
    """CREATE ROUTE name WITH SERVICE_NAME = ..., BROKER_INSTANCE = ..., LIFETIME = s,
    ADDRESS = 'TCP://host:port' | 'LOCAL' | 'TRANSPORT'."""
    name: str
    options: dict[str, Any] = field(hash=False)

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        name = p.dotted_name()
        authorization(p)
        p.expect_word("WITH")
        return cls(head.line, head.column, name, options(p))

    def create(self, broker: TSqlBroker, opts: dict[str, Any]) -> None:
        lifetime = opts.get("LIFETIME")
        broker.create_route(self.name, opts.get("SERVICE_NAME"),
                            _address(str(opts.get("ADDRESS", "LOCAL"))),
                            opts.get("BROKER_INSTANCE"),
                            None if lifetime is None else float(lifetime))

    def run(self, frame: Frame) -> None:
        self.create(frame.session.broker, values(frame, self.options))


@statement("ALTER ROUTE")
@dataclass(frozen=True)
class AlterRoute(CreateRoute):
    def run(self, frame: Frame) -> None:
        broker = frame.session.broker
        route = next((r for r in broker.catalog.routes if r.name == self.name), None)
        if route is None:
            raise TSqlError(f"Cannot alter the route '{self.name}', because it does not"
                            " exist or you do not have permission.", NOT_FOUND)
        left = None if route.expires_at is None else max(
            route.expires_at - broker.clock.now(), 0.001)
        now = {"SERVICE_NAME": route.service_name, "ADDRESS": route.address,
               "BROKER_INSTANCE": route.broker_instance, "LIFETIME": left}
        opts = {**now, **values(frame, self.options)}
        broker.drop_route(self.name)
        self.create(broker, opts)


@statement("CREATE BROKER PRIORITY")
@dataclass(frozen=True)
class CreateBrokerPriority(Statement):
    """CREATE BROKER PRIORITY name FOR CONVERSATION SET (CONTRACT_NAME = ...,
    LOCAL_SERVICE_NAME = ..., REMOTE_SERVICE_NAME = '...', PRIORITY_LEVEL = n | DEFAULT)."""
    name: str
    options: dict[str, Any] = field(hash=False)

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        name = p.dotted_name()
        p.expect_word("FOR")
        p.expect_word("CONVERSATION")
        p.expect_word("SET")
        return cls(head.line, head.column, name, options(p))

    def create(self, broker: TSqlBroker, opts: dict[str, Any]) -> None:
        level = opts.get("PRIORITY_LEVEL", "DEFAULT")
        broker.create_broker_priority(
            self.name, contract=str(opts.get("CONTRACT_NAME", "ANY")),
            local_service=str(opts.get("LOCAL_SERVICE_NAME", "ANY")),
            remote_service=str(opts.get("REMOTE_SERVICE_NAME", "ANY")),
            priority_level=5 if level == "DEFAULT" else int(level))

    def run(self, frame: Frame) -> None:
        self.create(frame.session.broker, values(frame, self.options))


@statement("ALTER BROKER PRIORITY")
@dataclass(frozen=True)
class AlterBrokerPriority(CreateBrokerPriority):
    def run(self, frame: Frame) -> None:
        broker = frame.session.broker
        found = next((p for p in broker.catalog.priorities if p.name == self.name), None)
        if found is None:
            raise TSqlError(f"Cannot alter the broker priority '{self.name}', because it does"
                            " not exist or you do not have permission.", NOT_FOUND)
        now = {"CONTRACT_NAME": found.contract, "LOCAL_SERVICE_NAME": found.local_service,
               "REMOTE_SERVICE_NAME": found.remote_service,
               "PRIORITY_LEVEL": found.priority_level}
        opts = {**now, **values(frame, self.options)}
        broker.drop_broker_priority(self.name)
        self.create(broker, opts)


@statement("DROP ROUTE")
class DropRoute(Drop):
    def drop(self, broker: TSqlBroker) -> None:
        broker.drop_route(self.name)


@statement("DROP BROKER PRIORITY")
class DropBrokerPriority(Drop):
    def drop(self, broker: TSqlBroker) -> None:
        broker.drop_broker_priority(self.name)
