"""Control of flow: BEGIN ... END, IF / ELSE, WHILE / BREAK / CONTINUE, BEGIN TRY / BEGIN
CATCH, RETURN, PRINT, RAISERROR, THROW, WAITFOR DELAY."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql import values
from sbroker.apps.tsql.errors import (
    NOT_IN_CATCH,
    THROW_NUMBER,
    USER,
    TSqlError,
    unsupported,
)
from sbroker.apps.tsql.evaluate import truth
from sbroker.apps.tsql.session import Frame
from sbroker.apps.tsql.statement import (
    Break,
    Continue,
    Head,
    Parser,
    Return,
    Statement,
    execute,
    run,
    statement,
)
from sbroker.apps.tsql.tokens import Kind


@statement("BEGIN")
@dataclass(frozen=True)
class Block(Statement):
    body: tuple[Statement, ...]

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        body = p.block_until()
        p.expect_word("END")
        return cls(head.line, head.column, body)

    def run(self, frame: Frame) -> None:
        run(frame, self.body)


@statement("IF")
@dataclass(frozen=True)
class If(Statement):
    condition: n.Expr
    then: Statement
    otherwise: Statement | None

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        condition = p.expression()
        then = p.required()
        otherwise = p.required() if p.accept_word("ELSE") else None
        return cls(head.line, head.column, condition, then, otherwise)

    def run(self, frame: Frame) -> None:
        if truth(frame.value(self.condition)):
            execute(frame, self.then)
        elif self.otherwise is not None:
            execute(frame, self.otherwise)


@statement("WHILE")
@dataclass(frozen=True)
class While(Statement):
    condition: n.Expr
    body: Statement

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        condition = p.expression()
        return cls(head.line, head.column, condition, p.required())

    def run(self, frame: Frame) -> None:
        while truth(frame.value(self.condition)):
            try:
                execute(frame, self.body)
            except Break:
                return
            except Continue:
                continue


@statement("BREAK", "CONTINUE")
@dataclass(frozen=True)
class Leave(Statement):
    """BREAK or CONTINUE."""
    signal: type[Exception]

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        return cls(head.line, head.column, Break if head.words == ("BREAK",) else Continue)

    def run(self, frame: Frame) -> None:
        raise self.signal()


@statement("BEGIN TRY")
@dataclass(frozen=True)
class TryCatch(Statement):
    body: tuple[Statement, ...]
    handler: tuple[Statement, ...]

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        body = p.block_until("TRY")
        p.advance()
        p.advance()
        p.accept_op(";")
        p.expect_word("BEGIN")
        p.expect_word("CATCH")
        handler = p.block_until("CATCH")
        p.advance()
        p.advance()
        return cls(head.line, head.column, body, handler)

    def run(self, frame: Frame) -> None:
        try:
            run(frame, self.body)
        except TSqlError as exc:
            if exc.severity < 11:
                raise
            frame.session.error_number = exc.number
            if frame.session.xact_abort and frame.session.tx is not None:
                frame.session.rollback()
            frame.handling.append(exc)
            try:
                run(frame, self.handler)
            finally:
                frame.handling.pop()


@statement("RETURN")
@dataclass(frozen=True)
class ReturnValue(Statement):
    value: n.Expr | None

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        value = None
        if p.tok.kind in (Kind.VAR, Kind.NUMBER, Kind.SYSVAR, Kind.STRING) or p.tok.is_op(
                "(", "-"):
            value = p.expression()
        return cls(head.line, head.column, value)

    def run(self, frame: Frame) -> None:
        raise Return(frame.value(self.value))


@statement("PRINT")
@dataclass(frozen=True)
class Print(Statement):
    value: n.Expr

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        return cls(head.line, head.column, p.expression())

    def run(self, frame: Frame) -> None:
        value = frame.value(self.value)
        frame.session.out("" if value is None else values.text_of(value))


@statement("RAISERROR")
@dataclass(frozen=True)
class Raiserror(Statement):
    message: n.Expr
    severity: n.Expr
    state: n.Expr
    args: tuple[n.Expr, ...]

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        p.expect_op("(")
        args = [p.expression()]
        while p.accept_op(","):
            args.append(p.expression())
        p.expect_op(")")
        if len(args) < 3:
            raise p.error("RAISERROR needs a message, a severity and a state")
        if p.accept_word("WITH"):
            p.expect_word("LOG", "NOWAIT", "SETERROR")
            while p.accept_op(","):
                p.expect_word("LOG", "NOWAIT", "SETERROR")
        return cls(head.line, head.column, args[0], args[1], args[2], tuple(args[3:]))

    def run(self, frame: Frame) -> None:
        message = frame.value(self.message)
        severity = int(frame.value(self.severity))
        state = int(frame.value(self.state))
        if isinstance(message, int):
            raise unsupported(f"RAISERROR with a message number ({message}), which needs"
                              " sys.messages: give the text")
        text = printf(values.text_of(message), [frame.value(a) for a in self.args])
        if severity <= 10:
            frame.session.out(text)
            return
        raise TSqlError(text, USER, severity, state)


def printf(template: str, args: list[Any]) -> str:
    """RAISERROR's substitution of %s, %d, %i, %u, %x (with an optional width)."""
    out: list[str] = []
    i = 0
    queue = list(args)
    while i < len(template):
        ch = template[i]
        if ch != "%" or i + 1 >= len(template):
            out.append(ch)
            i += 1
            continue
        j = i + 1
        while j < len(template) and (template[j].isdigit() or template[j] in "-+ #.*l"):
            j += 1
        kind = template[j] if j < len(template) else ""
        if kind == "%":
            out.append("%")
        elif kind in "sdiuxXo" and kind:
            value = queue.pop(0) if queue else None
            text = "(null)" if value is None else values.text_of(value)
            if kind in "xX" and value is not None:
                text = format(int(value), kind)
            out.append(text)
        else:
            out.append(template[i:j + 1])
        i = j + 1
    return "".join(out)


@statement("THROW")
@dataclass(frozen=True)
class Throw(Statement):
    number: n.Expr | None         # None: rethrow in CATCH
    message: n.Expr | None
    state: n.Expr | None

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        if p.tok.kind is Kind.EOF or p.tok.is_op(";") or p.starts_statement() or p.tok.is_word(
                "END", "ELSE"):
            return cls(head.line, head.column, None, None, None)
        number = p.expression()
        p.expect_op(",")
        message = p.expression()
        p.expect_op(",")
        return cls(head.line, head.column, number, message, p.expression())

    def run(self, frame: Frame) -> None:
        if self.number is None:
            caught = frame.caught()
            if caught is None:
                raise TSqlError("THROW without parameters should be inside a CATCH block",
                                NOT_IN_CATCH)
            raise caught
        number = int(frame.value(self.number))
        if number < USER:
            raise TSqlError(f"Error number {number} in the THROW statement is outside the"
                            " valid range. Specify an error number in the valid range of"
                            " 50000 to 2147483647.", THROW_NUMBER)
        message = values.text_of(frame.value(self.message)) if self.message else ""
        state = int(frame.value(self.state)) if self.state else 1
        raise TSqlError(message, number, 16, state)


@statement("WAITFOR DELAY", "WAITFOR TIME")
@dataclass(frozen=True)
class WaitforDelay(Statement):
    delay: n.Expr

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        if head.words[1] == "TIME":
            raise p.unsupported("WAITFOR TIME (use WAITFOR DELAY)", head.first)
        return cls(head.line, head.column, p.expression())

    def run(self, frame: Frame) -> None:
        frame.session.sleep(values.delay_seconds(frame.value(self.delay)))
