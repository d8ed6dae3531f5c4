"""CREATE / ALTER / DROP QUEUE: STATUS, RETENTION, ACTIVATION (STATUS, PROCEDURE_NAME,
MAX_QUEUE_READERS, EXECUTE AS, DROP), POISON_MESSAGE_HANDLING.  An activation's
PROCEDURE_NAME names a T-SQL procedure, which ``sbroker.apps.tsql.activate`` runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sbroker.apps.tsql.errors import NOT_FOUND, TSqlError, unsupported
from sbroker.apps.tsql.ports import TSqlBroker
from sbroker.apps.tsql.session import Frame
from sbroker.apps.tsql.statement import Head, Parser, Statement, statement
from sbroker.apps.tsql.statements.catalog import Drop
from sbroker.apps.tsql.statements.options import on, options, value
from sbroker.core.catalog import Activation

#: A T-SQL procedure named by an activation runs through this module (docs/tsql.md,
#: "Activation procedures in T-SQL").
ACTIVATE = "sbroker.apps.tsql.activate"


def activation_procedure(name: str) -> str:
    """PROCEDURE_NAME as the activation's import path: a T-SQL procedure by name, or a
    Python ``module:function`` given as a quoted name."""
    return name if ":" in name else f"{ACTIVATE}:{name}"


@statement("CREATE QUEUE")
@dataclass(frozen=True)
class CreateQueue(Statement):
    name: str
    options: dict[str, Any] = field(hash=False)

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        name = p.dotted_name()
        opts: dict[str, Any] = {}
        if p.accept_word("WITH"):
            opts = options(p)
        elif head.words[0] == "ALTER" and p.tok.is_word("REBUILD", "REORGANIZE", "MOVE"):
            raise p.unsupported(f"ALTER QUEUE {p.tok.value.upper()}")
        if p.accept_word("ON"):
            p.name()  # a filegroup: one database file here
        return cls(head.line, head.column, name, opts)

    def settings(self, frame: Frame, current: Activation | None) -> dict[str, Any]:
        """The queue's settings as ``create_queue`` / ``alter_queue`` take them."""
        out: dict[str, Any] = {}
        for key, option in self.options.items():
            if key == "STATUS":
                out["status"] = on(option, "STATUS")
            elif key == "RETENTION":
                out["retention"] = on(option, "RETENTION")
            elif key == "POISON_MESSAGE_HANDLING":
                out["poison_message_handling"] = on(option.get("STATUS"),
                                                    "POISON_MESSAGE_HANDLING")
            elif key == "ACTIVATION":
                out["activation"] = _activation(frame, option, current)
            else:
                raise unsupported(f"QUEUE option {key}")
        return out

    def run(self, frame: Frame) -> None:
        frame.session.broker.create_queue(self.name, **self.settings(frame, None))
        frame.session.queues_changed()


@statement("ALTER QUEUE")
@dataclass(frozen=True)
class AlterQueue(CreateQueue):
    """Changes the options it names; an ACTIVATION without PROCEDURE_NAME changes the
    activation the queue has."""

    def run(self, frame: Frame) -> None:
        broker = frame.session.broker
        current = None
        if "ACTIVATION" in self.options:
            queue = broker.catalog.queue(self.name)
            if queue.activation_defined and queue.activation_procedure:
                current = Activation(queue.activation_procedure, queue.max_queue_readers,
                                     queue.activation_status, queue.execute_as)
        broker.alter_queue(self.name, **self.settings(frame, current))


def _activation(frame: Frame, opts: dict[str, Any], current: Activation | None
                ) -> Activation | None:
    if opts.get("DROP"):
        return None
    procedure = opts.get("PROCEDURE_NAME")
    base = current or (Activation(activation_procedure(str(procedure))) if procedure else None)
    if base is None:
        raise TSqlError("ACTIVATION needs PROCEDURE_NAME the first time", NOT_FOUND)
    execute_as = opts.get("EXECUTE", base.execute_as)
    return Activation(
        activation_procedure(str(procedure)) if procedure else base.procedure,
        int(value(frame, opts.get("MAX_QUEUE_READERS", base.max_queue_readers))),
        on(opts.get("STATUS", "ON" if base.status else "OFF"), "ACTIVATION STATUS"),
        None if execute_as is None else str(execute_as))


@statement("DROP QUEUE")
class DropQueue(Drop):
    def drop(self, broker: TSqlBroker) -> None:
        broker.drop_queue(self.name)

    def run(self, frame: Frame) -> None:
        super().run(frame)
        frame.session.queues_changed()
