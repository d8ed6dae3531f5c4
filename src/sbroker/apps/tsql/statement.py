"""What a T-SQL statement is: one class per statement, declared once with the keywords that
begin it, its parse rule and how it runs, side by side::

    @statement("BEGIN CONVERSATION TIMER")
    @dataclass(frozen=True)
    class BeginConversationTimer(Statement):
        handle: n.Expr
        timeout: n.Expr

        @classmethod
        def parse(cls, p: Parser, head: Head) -> Statement:  # after the keywords
            ...
        def run(self, frame: Frame) -> None:
            ...

``statement`` enters the class in ``SYNTAX``, the table of leading keywords -> statement
(the way sqlglot's parser dispatches on a token); the parser reads a batch through it, and
the same table says where a statement without a semicolon ends (``grammar``).  The classes
live in ``statements/``, one module per concept, imported with the package."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sbroker.apps.tsql.errors import SESSION_STOPPED, TSqlError
from sbroker.apps.tsql.grammar import SqlParser
from sbroker.apps.tsql.session import Frame
from sbroker.apps.tsql.tokens import Kind, Token, tokenize
from sbroker.core.errors import BrokerError


@dataclass(frozen=True)
class Head:
    """The start of a statement: its first token, that token's index, and the keywords the
    table matched (upper-cased; the parser stands after them)."""

    first: Token
    start: int
    words: tuple[str, ...]

    @property
    def line(self) -> int:
        return self.first.line

    @property
    def column(self) -> int:
        return self.first.column


@dataclass(frozen=True)
class Statement:
    """A parsed statement; it keeps its first token's line and column, so a runtime error
    names them."""

    line: int
    column: int

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        """The statement whose keywords ``head`` holds, read from ``p``."""
        raise NotImplementedError(cls.__name__)

    def run(self, frame: Frame) -> None:
        raise NotImplementedError(type(self).__name__)


S = TypeVar("S", bound=type[Statement])


def _fits(tok: Token, word: str) -> bool:
    """Does ``tok`` fit one element of a statement's syntax: a keyword (upper case), ``@``
    (a variable), ``name`` (an identifier) or an operator such as ``(``."""
    if word == "@":
        return tok.kind is Kind.VAR
    if word == "name":
        return tok.kind in (Kind.WORD, Kind.QUOTED)
    if word.isupper():
        return tok.is_word(word)
    return tok.is_op(word)


class Syntax:
    """Leading keywords -> the statement they begin.  A syntax is keywords (consumed before
    ``parse`` is called), then optionally what must follow them, looked at but not
    consumed: ``@`` a variable, ``name`` an identifier, an operator, more keywords."""

    def __init__(self) -> None:
        self._by_first: dict[str, list[tuple[tuple[str, ...], int, type[Statement]]]] = {}

    def __call__(self, *syntaxes: str) -> Callable[[S], S]:
        """``@statement("DROP QUEUE", ...)``: the class begins with any of ``syntaxes``."""
        def register(cls: S) -> S:
            for text in syntaxes:
                self._add(tuple(text.split()), cls)
            return cls
        return register

    def _add(self, words: tuple[str, ...], cls: type[Statement]) -> None:
        entries = self._by_first.setdefault(words[0], [])
        if any(known == words for known, _, _ in entries):
            raise ValueError(f"{' '.join(words)} is already a statement")
        consumed = next((i for i, w in enumerate(words) if not w.isupper()), len(words))
        entries.append((words, consumed, cls))
        entries.sort(key=lambda entry: -len(entry[0]))  # the longest syntax first

    def match(self, tokens: list[Token], i: int) -> tuple[tuple[str, ...], type[Statement]] | None:
        """The keywords and class of the statement that begins at ``tokens[i]``, if one
        does."""
        first = tokens[i]
        if first.kind is not Kind.WORD:
            return None
        last = len(tokens) - 1
        for words, consumed, cls in self._by_first.get(first.upper, ()):
            if all(_fits(tokens[min(i + k, last)], w) for k, w in enumerate(words)):
                return words[:consumed], cls
        return None

    def classes(self) -> set[type[Statement]]:
        """Every statement of the table."""
        return {cls for entries in self._by_first.values() for _, _, cls in entries}

    def beginning(self, word: str) -> list[str]:
        """The syntaxes of the statements that begin with ``word``."""
        return sorted(" ".join(words) for words, _, _ in self._by_first.get(word, ()))


#: Every statement sbroker knows; ``@statement(...)`` enters one.
SYNTAX = Syntax()
statement = SYNTAX


class Parser(SqlParser):
    """The statements of one batch, read through ``SYNTAX``."""

    def __init__(self, tokens: list[Token], text: str, syntax: Syntax = SYNTAX) -> None:
        super().__init__(tokens, text)
        self.syntax = syntax

    def starts_statement(self, i: int | None = None) -> bool:
        return self.syntax.match(self.tokens, self.pos if i is None else i) is not None

    def batch(self) -> tuple[Statement, ...]:
        body = []
        while self.tok.kind is not Kind.EOF:
            stmt = self.statement()
            if stmt is not None:
                body.append(stmt)
        return tuple(body)

    def statement(self) -> Statement | None:
        """The next statement (None for a lone ``;``)."""
        tok = self.tok
        if tok.is_op(";"):
            self.advance()
            return None
        found = self.syntax.match(self.tokens, self.pos)
        if found is None:
            raise self._not_a_statement(tok)
        words, cls = found
        head = Head(tok, self.pos, words)
        self.pos += len(words)
        stmt = cls.parse(self, head)
        self.accept_op(";")
        return stmt

    def required(self) -> Statement:
        """The one statement an IF, ELSE or WHILE runs."""
        while self.accept_op(";"):
            pass
        stmt = self.statement()
        if stmt is None:
            raise self.error("expected a statement")
        return stmt

    def if_exists(self) -> bool:
        """``IF EXISTS`` (of DROP), read when it stands here."""
        if self.tok.is_word("IF") and self.peek().is_word("EXISTS"):
            self.pos += 2
            return True
        return False

    def _not_a_statement(self, tok: Token) -> Exception:
        if tok.kind is not Kind.WORD:
            return self.error("expected a statement")
        if tok.is_word("ELSE"):
            return self.error("ELSE without an IF before it")
        if tok.is_word("END"):
            return self.error("END without a BEGIN before it")
        known = self.syntax.beginning(tok.upper)
        if 0 < len(known) <= 3:
            return self.error(f"expected {' or '.join(known)}")
        if known and self.peek().kind in (Kind.WORD, Kind.QUOTED):
            return self.unsupported(f"{tok.upper} {self.peek().value.upper()}")
        return self.unsupported(f"the statement {tok.value.upper()}")

    def block_until(self, *closing: str) -> tuple[Statement, ...]:
        """Statements up to (not including) the word END followed by one of ``closing``
        (or a plain END when ``closing`` is empty)."""
        body: list[Statement] = []
        while True:
            tok = self.tok
            if tok.kind is Kind.EOF:
                raise self.error("missing END")
            if tok.is_word("END") and not self.starts_statement() and (
                    not closing or self.peek().is_word(*closing)):
                return tuple(body)
            stmt = self.statement()
            if stmt is not None:
                body.append(stmt)


def parse(text: str, tokens: list[Token] | None = None) -> tuple[Statement, ...]:
    """The statements of one batch of T-SQL (its tokens, when already split from a
    script)."""
    return Parser(tokens if tokens is not None else tokenize(text), text).batch()


# -- running statements ------------------------------------------------------------------------
class Break(Exception):
    """BREAK: leave the innermost WHILE."""


class Continue(Exception):
    """CONTINUE: next round of the innermost WHILE."""


class Return(Exception):
    """RETURN: leave the procedure or batch with a value."""

    def __init__(self, value: Any) -> None:
        super().__init__(value)
        self.value = value


def execute(frame: Frame, stmt: Statement) -> None:
    """Run one statement; an error gets the statement's position.  A session asked to stop
    (an activated procedure whose broker stops) runs no further statement: error 3980,
    and its open transaction rolls back when the session closes."""
    try:
        if frame.session.stopping.is_set():
            raise TSqlError("the session was stopped (the broker is stopping)",
                            SESSION_STOPPED)
        stmt.run(frame)
    except TSqlError as exc:
        if exc.line is None:
            exc.line, exc.column = stmt.line, stmt.column
            exc.procedure = exc.procedure or frame.procedure
        raise
    except BrokerError as exc:
        raise TSqlError(str(exc), exc.number, 16, line=stmt.line, column=stmt.column,
                        procedure=frame.procedure) from exc


def run(frame: Frame, body: tuple[Statement, ...]) -> None:
    """Run statements in order."""
    for stmt in body:
        execute(frame, stmt)
