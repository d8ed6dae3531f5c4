"""Transactions: BEGIN TRAN, COMMIT, ROLLBACK (one explicit transaction per session;
``@@TRANCOUNT`` counts the BEGINs)."""

from __future__ import annotations

from dataclasses import dataclass

from sbroker.apps.tsql.session import Frame
from sbroker.apps.tsql.statement import Head, Parser, Statement, statement
from sbroker.apps.tsql.tokens import Kind


@statement("BEGIN TRAN", "BEGIN TRANSACTION", "COMMIT", "ROLLBACK")
@dataclass(frozen=True)
class TranControl(Statement):
    action: str                 # BEGIN, COMMIT, ROLLBACK

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        if len(head.words) == 1:
            p.accept_word("TRAN", "TRANSACTION", "WORK")
        if p.tok.kind in (Kind.WORD, Kind.VAR) and not p.starts_statement() and not (
                p.tok.is_word("END", "ELSE")):
            p.advance()  # the transaction's name
        return cls(head.line, head.column, head.words[0])

    def run(self, frame: Frame) -> None:
        session = frame.session
        {"BEGIN": session.begin, "COMMIT": session.commit,
         "ROLLBACK": session.rollback}[self.action]()
