"""Plain SQL inside T-SQL: where a plain statement (SELECT, INSERT, UPDATE, CREATE TABLE ...)
ends, and the items of a SELECT.  The statement is translated later by sqlglot
(``translate``).

T-SQL needs no semicolons: a plain statement ends at ``;``, at the end of the batch, at the
ELSE or END of the block around it, or where another statement begins, as SQL Server's
parser finds it.  A word that begins a statement elsewhere continues this one where SQL lets
it (``INSERT ... SELECT``, ``UPDATE ... SET``, ``UNION SELECT``, ``DROP TABLE IF EXISTS``,
``ON DELETE CASCADE``, ``OFFSET ... FETCH``, MERGE's ``THEN UPDATE``, a CTE's statement);
the rules are ``_Scan``'s (docs/tsql.md, "Statements without semicolons")."""

from __future__ import annotations

from dataclasses import dataclass

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql.errors import REFUSED
from sbroker.apps.tsql.exprparse import REFUSED_FUNCTIONS, ExprParser, var_name
from sbroker.apps.tsql.tokens import Kind, Token

#: Words that end a plain statement without beginning one (outside a CASE expression): the
#: ELSE of an IF and the END of a BEGIN ... END block.
BLOCK_WORDS = ("ELSE", "END")
SET_OPS = ("=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=")
SELECT_CLAUSES = ("FROM", "WHERE", "GROUP", "HAVING", "ORDER", "INTO", "UNION", "EXCEPT",
                  "INTERSECT", "FOR", "OPTION")
#: What DROP ... IF EXISTS drops in plain SQL.
DROPPED = ("TABLE", "VIEW", "INDEX")
#: The statements a common table expression (``WITH x AS (...)``) may precede.
CTE_STATEMENTS = ("SELECT", "INSERT", "UPDATE", "DELETE", "MERGE")


@dataclass
class _Scan:
    """What a plain statement begun by ``verb`` has met so far, and so which statement
    words at its own level continue it rather than begin the next statement."""

    verb: str
    last: str = ""           # the last statement word it took in (the verb at first)
    has_rows: bool = False   # an INSERT has its SELECT or VALUES

    def __post_init__(self) -> None:
        self.last = self.verb

    def continues(self, word: str, prev: Token, nxt: Token) -> bool:
        if self.verb == "WITH" and word in CTE_STATEMENTS:
            self.verb = word  # the statement the CTE is for
            taken = True
        elif word == "SELECT":
            taken = (prev.is_word("UNION", "ALL", "EXCEPT", "INTERSECT")
                     or (self.verb == "INSERT" and not self.has_rows)
                     or (self.verb in ("CREATE", "ALTER") and prev.is_word("AS")))
        elif word == "SET":
            taken = self.last == "UPDATE"
        elif word in ("UPDATE", "DELETE", "INSERT"):
            taken = ((self.verb == "MERGE" and prev.is_word("THEN"))
                     or (word != "INSERT" and prev.is_word("ON")))
        elif word == "IF":  # DROP TABLE IF EXISTS
            taken = self.verb == "DROP" and prev.is_word(*DROPPED) and nxt.is_word("EXISTS")
        else:
            taken = word == "FETCH" and prev.is_word("ROWS", "ROW")  # OFFSET n ROWS FETCH
        if taken:
            self.last = word
            self.has_rows = self.has_rows or word == "SELECT"
        return taken


class SqlParser(ExprParser):
    """Plain statements and SELECT; which words begin a statement is the statement
    parser's to say (``starts_statement``)."""

    def starts_statement(self, i: int | None = None) -> bool:
        """Whether a statement begins at token ``i`` (the current one by default)."""
        raise NotImplementedError

    # -- plain SQL delimiting ------------------------------------------------------------
    def scan_to_end(self, verb: str) -> int:
        """Advance to the end of a plain SQL statement begun by ``verb``; returns the end
        position (exclusive)."""
        depth = case = 0
        scan = _Scan(verb)
        while True:
            tok = self.tok
            if tok.kind is Kind.EOF or (depth == 0 and tok.is_op(";", ")")):
                return self.pos
            if tok.is_op("("):
                depth += 1
            elif tok.is_op(")"):
                depth -= 1
            elif tok.is_word("CASE"):
                case += 1
            elif tok.is_word("END") and case:
                case -= 1
            elif depth == 0 and self._ends_before(scan, case > 0):
                return self.pos
            if tok.is_word("VALUES"):
                scan.has_rows = True  # INSERT ... VALUES takes no SELECT after it
            if tok.upper in REFUSED_FUNCTIONS:
                raise self.error(f"{tok.upper} reaches outside the database and is refused",
                                 number=REFUSED)
            self.advance()

    def _ends_before(self, scan: _Scan, in_case: bool) -> bool:
        """Whether the plain statement ends before the current token, at its own level."""
        tok = self.tok
        if tok.is_word(*BLOCK_WORDS):
            return not in_case
        return self.starts_statement() and not scan.continues(
            tok.upper, self.tokens[self.pos - 1], self.peek())

    # -- SELECT ----------------------------------------------------------------------------
    def query(self) -> n.Query:
        """A SELECT, from its SELECT keyword to its end."""
        self.expect_word("SELECT")
        start = self.pos - 1
        self.accept_word("ALL")
        if self.tok.is_word("DISTINCT"):
            self.pos = start + 1
            end = self.scan_to_end("SELECT")
            return n.Query((), "", sql=self.span(start, end))
        top = None
        top_sql = ""
        if self.accept_word("TOP"):
            top_start = self.pos
            top = self.expression()
            top_sql = self.span(top_start, self.pos)
            if self.accept_word("PERCENT"):
                raise self.unsupported("TOP ... PERCENT")
        items = [self.select_item()]
        while self.accept_op(","):
            items.append(self.select_item())
        rest_start = self.pos
        end = self.scan_to_end("SELECT")
        rest_end, xml_path = self._for_xml(rest_start, end)
        return n.Query(tuple(items), self.span(rest_start, rest_end), top, xml_path,
                       self.span(start, end), top_sql)

    def _for_xml(self, start: int, end: int) -> tuple[int, str | None]:
        """Cut a trailing ``FOR XML PATH('name')`` off the clauses ``start .. end``."""
        depth = 0
        for i in range(start, end):
            tok = self.tokens[i]
            depth += tok.is_op("(") - tok.is_op(")")
            if depth == 0 and tok.is_word("FOR") and self.tokens[i + 1].is_word("XML"):
                saved = self.pos
                self.pos = i + 2
                if not self.accept_word("PATH"):
                    raise self.unsupported("FOR XML other than PATH")
                name = "row"
                if self.accept_op("("):
                    name = self.advance().value
                    self.expect_op(")")
                if self.pos != end:
                    raise self.unsupported("options after FOR XML PATH")
                self.pos = saved
                return i, name
        return end, None

    def select_item(self) -> n.SelectItem:
        start = self.pos
        tok = self.tok
        if tok.kind is Kind.VAR and self.peek().is_op(*SET_OPS):
            self.advance()
            op = self.advance().value
            expr = self.expression()
            if op != "=":
                expr = n.Binary(op[0], n.Var(var_name(tok)), expr)
            return n.SelectItem(expr, None, var_name(tok), self.span(start + 2, self.pos))
        if (tok.kind in (Kind.WORD, Kind.QUOTED) and self.peek().is_op("=")
                and not self.starts_statement()):
            self.advance()
            self.advance()
            expr_start = self.pos
            item = self._item_expression()
            text = self.span(expr_start, self.pos)
            return n.SelectItem(item, tok.value, None, f"{text} AS [{tok.value}]")
        item = self._item_expression()
        expr_text = self.span(start, self.pos)
        alias = None
        if self.accept_word("AS"):
            alias = self.name() if self.tok.kind is not Kind.STRING else self.advance().value
        elif self.tok.kind is Kind.QUOTED or (
                self.tok.kind is Kind.WORD and not self.starts_statement()
                and self.tok.upper not in SELECT_CLAUSES
                and self.tok.upper not in BLOCK_WORDS):
            alias = self.name()
        sql = expr_text if alias is None else f"{expr_text} AS [{alias}]"
        return n.SelectItem(item, alias, None, sql)

    def _item_expression(self) -> n.Expr | None:
        """An item parsed as an expression, or None for what only the database evaluates
        (``*``, ``t.*``, aggregates over ``*``)."""
        start = self.pos
        try:
            return self.expression()
        except Exception:
            self.pos = start
        depth = 0
        while True:
            tok = self.tok
            if tok.kind is Kind.EOF or (depth == 0 and (
                    tok.is_op(",", ";", ")") or tok.upper in SELECT_CLAUSES
                    or tok.is_word(*BLOCK_WORDS) or self.starts_statement()
                    or tok.is_word("AS"))):
                return None
            depth += tok.is_op("(") - tok.is_op(")")
            self.advance()
