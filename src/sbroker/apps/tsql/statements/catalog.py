"""Service Broker's catalog: CREATE / ALTER / DROP of MESSAGE TYPE, CONTRACT, SERVICE and
EVENT NOTIFICATION, on the broker's Python API (queues, routes, priorities and the endpoint
have modules of their own)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sbroker.apps.tsql.errors import unsupported
from sbroker.apps.tsql.ports import TSqlBroker
from sbroker.apps.tsql.session import Frame
from sbroker.apps.tsql.statement import Head, Parser, Statement, statement
from sbroker.apps.tsql.statements.options import authorization

VALIDATIONS = {"NONE": "none", "EMPTY": "empty", "WELL_FORMED_XML": "well_formed_xml"}


@statement("CREATE MESSAGE TYPE")
@dataclass(frozen=True)
class CreateMessageType(Statement):
    name: str
    validation: str

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        name = p.dotted_name()
        authorization(p)
        validation = "NONE"
        if p.accept_word("VALIDATION"):
            p.expect_op("=")
            validation = p.name().upper()
            if p.accept_word("WITH"):
                raise p.unsupported("VALIDATION = VALID_XML WITH SCHEMA COLLECTION")
        return cls(head.line, head.column, name, validation)

    def kind(self) -> str:
        kind = VALIDATIONS.get(self.validation)
        if kind is None:
            raise unsupported(f"VALIDATION = {self.validation}")
        return kind

    def run(self, frame: Frame) -> None:
        frame.session.broker.create_message_type(self.name, self.kind())


@statement("ALTER MESSAGE TYPE")
@dataclass(frozen=True)
class AlterMessageType(CreateMessageType):
    """Changes the check made where a message is enqueued from then on."""

    def run(self, frame: Frame) -> None:
        frame.session.broker.alter_message_type(self.name, self.kind())


@statement("CREATE CONTRACT")
@dataclass(frozen=True)
class CreateContract(Statement):
    name: str
    message_types: dict[str, str] = field(hash=False)  # type -> initiator, target, any

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        name = p.dotted_name()
        authorization(p)
        p.expect_op("(")
        types: dict[str, str] = {}
        while True:
            mtype = p.dotted_name()
            p.expect_word("SENT")
            p.expect_word("BY")
            types[mtype] = p.expect_word("INITIATOR", "TARGET", "ANY").upper.lower()
            if not p.accept_op(","):
                break
        p.expect_op(")")
        return cls(head.line, head.column, name, types)

    def run(self, frame: Frame) -> None:
        frame.session.broker.create_contract(self.name, self.message_types)


@statement("ALTER CONTRACT")
@dataclass(frozen=True)
class AlterContract(Statement):
    """Does not exist in SQL Server, nor here: a contract cannot change."""

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        raise p.error("ALTER CONTRACT does not exist in SQL Server nor here: a contract"
                      " cannot change; ALTER SERVICE ... (DROP CONTRACT c), DROP CONTRACT c,"
                      " CREATE CONTRACT c (...), then ALTER SERVICE ... (ADD CONTRACT c)")


@statement("CREATE SERVICE")
@dataclass(frozen=True)
class CreateService(Statement):
    name: str
    queue: str
    contracts: tuple[str, ...]

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        name = p.dotted_name()
        authorization(p)
        p.expect_word("ON")
        p.expect_word("QUEUE")
        queue = p.dotted_name()
        contracts: list[str] = []
        if p.accept_op("("):
            while not p.accept_op(")"):
                contracts.append(p.dotted_name())
                p.accept_op(",")
        return cls(head.line, head.column, name, queue, tuple(contracts))

    def run(self, frame: Frame) -> None:
        frame.session.broker.create_service(self.name, self.queue, list(self.contracts))


@statement("ALTER SERVICE")
@dataclass(frozen=True)
class AlterService(Statement):
    """ALTER SERVICE name [ON QUEUE q] [(ADD CONTRACT c, DROP CONTRACT d, ...)]."""
    name: str
    queue: str | None
    changes: tuple[tuple[str, str], ...]  # (ADD | DROP, contract)

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        name = p.dotted_name()
        queue = None
        if p.accept_word("ON"):
            p.expect_word("QUEUE")
            queue = p.dotted_name()
        changes: list[tuple[str, str]] = []
        if p.accept_op("("):
            while not p.accept_op(")"):
                change = p.expect_word("ADD", "DROP").upper
                p.expect_word("CONTRACT")
                changes.append((change, p.dotted_name()))
                p.accept_op(",")
        return cls(head.line, head.column, name, queue, tuple(changes))

    def run(self, frame: Frame) -> None:
        frame.session.broker.alter_service(
            self.name, queue=self.queue,
            add_contracts=[c for change, c in self.changes if change == "ADD"],
            drop_contracts=[c for change, c in self.changes if change == "DROP"])


@statement("CREATE EVENT NOTIFICATION")
@dataclass(frozen=True)
class CreateEventNotification(Statement):
    """CREATE EVENT NOTIFICATION name ON QUEUE q FOR event TO SERVICE 'service' [, 'id']."""
    name: str
    queue: str
    event: str
    to_service: str

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        name = p.dotted_name()
        p.expect_word("ON")
        p.expect_word("QUEUE")
        queue = p.dotted_name()
        p.expect_word("FOR")
        event = p.name().upper()
        p.expect_word("TO")
        p.expect_word("SERVICE")
        to_service = p.name_or_string()
        if p.accept_op(","):
            p.name_or_string()
        return cls(head.line, head.column, name, queue, event, to_service)

    def run(self, frame: Frame) -> None:
        frame.session.broker.create_event_notification(self.name, self.queue, self.event,
                                                       self.to_service)


# -- DROP -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Drop(Statement):
    """DROP <object> [IF EXISTS] name: each kind says how the broker drops one."""
    name: str
    if_exists: bool

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        if_exists = p.if_exists()
        return cls(head.line, head.column, p.dotted_name(), if_exists)

    def drop(self, broker: TSqlBroker) -> None:
        raise NotImplementedError

    def run(self, frame: Frame) -> None:
        try:
            self.drop(frame.session.broker)
        except LookupError:
            if not self.if_exists:
                raise


@statement("DROP MESSAGE TYPE")
class DropMessageType(Drop):
    def drop(self, broker: TSqlBroker) -> None:
        broker.drop_message_type(self.name)


@statement("DROP CONTRACT")
class DropContract(Drop):
    def drop(self, broker: TSqlBroker) -> None:
        broker.drop_contract(self.name)


@statement("DROP SERVICE")
class DropService(Drop):
    def drop(self, broker: TSqlBroker) -> None:
        broker.drop_service(self.name)


@statement("DROP EVENT NOTIFICATION")
class DropEventNotification(Drop):
    """DROP EVENT NOTIFICATION name ON QUEUE q."""

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        stmt = super().parse(p, head)
        if p.accept_word("ON"):
            p.expect_word("QUEUE")
            p.dotted_name()
        return stmt

    def drop(self, broker: TSqlBroker) -> None:
        broker.drop_event_notification(self.name)
