"""Conversations: BEGIN DIALOG, SEND, END CONVERSATION, BEGIN CONVERSATION TIMER, MOVE
CONVERSATION, each on the session's transaction (the explicit one, or one of its own)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql import values
from sbroker.apps.tsql.session import Frame
from sbroker.apps.tsql.statement import Head, Parser, Statement, statement
from sbroker.apps.tsql.statements.options import on, options
from sbroker.apps.tsql.statements.options import values as option_values


@statement("BEGIN DIALOG")
@dataclass(frozen=True)
class BeginDialog(Statement):
    """BEGIN DIALOG [CONVERSATION] @h FROM SERVICE s TO SERVICE 'target'[, 'instance']
    [ON CONTRACT c] [WITH RELATED_CONVERSATION = @h | RELATED_CONVERSATION_GROUP = @g,
    LIFETIME = s, ENCRYPTION = ON | OFF]."""
    handle: str
    from_service: str
    to_service: n.Expr
    instance: n.Expr | None
    contract: str
    options: dict[str, Any] = field(hash=False)

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        p.accept_word("CONVERSATION")
        handle = p.variable()
        p.expect_word("FROM")
        p.expect_word("SERVICE")
        from_service = p.name_or_string()
        p.expect_word("TO")
        p.expect_word("SERVICE")
        to_service = p.expression()
        instance = p.expression() if p.accept_op(",") else None
        contract = "DEFAULT"
        if p.accept_word("ON"):
            p.expect_word("CONTRACT")
            contract = p.name_or_string()
        opts = options(p) if p.accept_word("WITH") else {}
        return cls(head.line, head.column, handle, from_service, to_service, instance,
                   contract, opts)

    def run(self, frame: Frame) -> None:
        opts = option_values(frame, self.options)
        instance = frame.value(self.instance)
        if isinstance(instance, str) and instance.upper() == "CURRENT DATABASE":
            instance = None
        lifetime = opts.get("LIFETIME")
        with frame.session.work() as tx:
            handle = tx.begin_dialog(
                self.from_service, values.text_of(frame.value(self.to_service)),
                self.contract, broker_instance=instance,
                related_conversation=opts.get("RELATED_CONVERSATION"),
                related_conversation_group=opts.get("RELATED_CONVERSATION_GROUP"),
                lifetime=None if lifetime is None else float(lifetime),
                encryption=on(opts.get("ENCRYPTION", "ON"), "ENCRYPTION"))
        frame.assign(self.handle, handle)


def _body(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return values.text_of(value).encode("utf-8")


@statement("SEND ON CONVERSATION")
@dataclass(frozen=True)
class Send(Statement):
    """SEND ON CONVERSATION @h | (@h, @k, ...) [MESSAGE TYPE t] [(body)]."""
    handles: tuple[n.Expr, ...]
    message_type: str
    body: n.Expr | None

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        handles = []
        if p.accept_op("("):
            handles.append(p.expression())
            while p.accept_op(","):
                handles.append(p.expression())
            p.expect_op(")")
        else:
            handles.append(p.expression())
        message_type = "DEFAULT"
        if p.accept_word("MESSAGE"):
            p.expect_word("TYPE")
            message_type = p.dotted_name()
        body = None
        if p.accept_op("("):
            body = p.expression()
            p.expect_op(")")
        return cls(head.line, head.column, tuple(handles), message_type, body)

    def run(self, frame: Frame) -> None:
        handles = [frame.value(h) for h in self.handles]
        body = _body(frame.value(self.body))
        with frame.session.work() as tx:
            tx.send(handles if len(handles) > 1 else handles[0], self.message_type, body)


@statement("END CONVERSATION")
@dataclass(frozen=True)
class EndConversation(Statement):
    """END CONVERSATION @h [WITH ERROR = n DESCRIPTION = '...' | WITH CLEANUP]."""
    handle: n.Expr
    error: n.Expr | None = None
    description: n.Expr | None = None
    cleanup: bool = False

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        handle = p.expression()
        if not p.accept_word("WITH"):
            return cls(head.line, head.column, handle)
        if p.accept_word("CLEANUP"):
            return cls(head.line, head.column, handle, cleanup=True)
        p.expect_word("ERROR")
        p.expect_op("=")
        error = p.expression()
        p.expect_word("DESCRIPTION")
        p.expect_op("=")
        return cls(head.line, head.column, handle, error, p.expression())

    def run(self, frame: Frame) -> None:
        error = frame.value(self.error)
        description = frame.value(self.description)
        with frame.session.work() as tx:
            tx.end_conversation(frame.value(self.handle),
                                error=None if error is None else int(error),
                                description=None if self.description is None
                                else values.text_of(description),
                                cleanup=self.cleanup)


@statement("BEGIN CONVERSATION TIMER")
@dataclass(frozen=True)
class BeginConversationTimer(Statement):
    """BEGIN CONVERSATION TIMER (@h) TIMEOUT = seconds."""
    handle: n.Expr
    timeout: n.Expr

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        p.expect_op("(")
        handle = p.expression()
        p.expect_op(")")
        p.expect_word("TIMEOUT")
        p.expect_op("=")
        return cls(head.line, head.column, handle, p.expression())

    def run(self, frame: Frame) -> None:
        with frame.session.work() as tx:
            tx.begin_conversation_timer(frame.value(self.handle),
                                        float(frame.value(self.timeout)))


@statement("MOVE CONVERSATION")
@dataclass(frozen=True)
class MoveConversation(Statement):
    """MOVE CONVERSATION @h TO @group."""
    handle: n.Expr
    group: n.Expr

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        handle = p.expression()
        p.expect_word("TO")
        return cls(head.line, head.column, handle, p.expression())

    def run(self, frame: Frame) -> None:
        with frame.session.work() as tx:
            tx.move_conversation(frame.value(self.handle), frame.value(self.group))
