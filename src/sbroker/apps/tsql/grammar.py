"""The statement grammar's base: dispatch on the leading keyword through ``rules`` (a table
of token -> rule, as sqlglot's parser does), blocks, SELECT, and the delimiting of plain SQL
statements (translated later by sqlglot, in ``translate``)."""

from __future__ import annotations

from collections.abc import Callable

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql.errors import REFUSED
from sbroker.apps.tsql.exprparse import REFUSED_FUNCTIONS, ExprParser, var_name
from sbroker.apps.tsql.tokens import Kind, Token

#: Keywords that begin a statement: a plain SQL statement ends before one (outside
#: parentheses), as T-SQL needs no semicolons.
STARTS = frozenset((
    "SELECT", "INSERT", "UPDATE", "DELETE", "MERGE", "TRUNCATE", "IF", "WHILE", "BEGIN", "END",
    "DECLARE", "SET", "EXEC", "EXECUTE", "RETURN", "PRINT", "RAISERROR", "THROW", "BREAK",
    "CONTINUE", "WAITFOR", "SEND", "RECEIVE", "CREATE", "ALTER", "DROP", "USE", "COMMIT",
    "ROLLBACK", "ELSE", "GET", "MOVE", "GOTO", "SAVE", "GRANT", "DENY", "REVOKE", "BULK",
    "OPEN", "FETCH", "CLOSE", "DEALLOCATE",
))
SET_OPS = ("=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=")
SELECT_CLAUSES = ("FROM", "WHERE", "GROUP", "HAVING", "ORDER", "INTO", "UNION", "EXCEPT",
                  "INTERSECT", "FOR", "OPTION")


Rule = Callable[["Parser"], "n.Stmt | None"]


class Parser(ExprParser):
    """Statements of one batch; ``rules`` maps a leading keyword to its rule."""

    def __init__(self, tokens: list[Token], text: str, rules: dict[str, Rule]) -> None:
        super().__init__(tokens, text)
        self.rules = rules
        self.parse_subquery = self.subquery

    # -- the batch and statements --------------------------------------------------------
    def batch(self) -> tuple[n.Stmt, ...]:
        body = []
        while self.tok.kind is not Kind.EOF:
            stmt = self.statement()
            if stmt is not None:
                body.append(stmt)
        return tuple(body)

    def statement(self) -> n.Stmt | None:
        tok = self.tok
        if tok.is_op(";"):
            self.advance()
            return None
        if tok.kind is not Kind.WORD:
            raise self.error("expected a statement")
        rule = self.rules.get(tok.upper)
        if rule is None:
            raise self.unsupported(f"the statement {tok.value.upper()}")
        stmt = rule(self)
        self.accept_op(";")
        return stmt

    def block_until(self, *closing: str) -> tuple[n.Stmt, ...]:
        """Statements up to (not including) the word END followed by one of ``closing``
        (or a plain END when ``closing`` is empty)."""
        body: list[n.Stmt] = []
        while True:
            tok = self.tok
            if tok.kind is Kind.EOF:
                raise self.error("missing END")
            if tok.is_word("END") and not self.peek().is_word("CONVERSATION") and (
                    not closing or self.peek().is_word(*closing)):
                return tuple(body)
            stmt = self.statement()
            if stmt is not None:
                body.append(stmt)

    # -- plain SQL delimiting ------------------------------------------------------------
    def scan_to_end(self, verb: str) -> int:
        """Advance to the end of a plain SQL statement begun by ``verb``; returns the end
        position (exclusive).  Stops at ``;``, a statement keyword at depth 0, an unmatched
        ``)``, or the end of the batch."""
        depth = case = 0
        seen_set = seen_select = False
        while True:
            tok = self.tok
            prev = self.tokens[self.pos - 1] if self.pos else tok
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
            elif depth == 0 and tok.upper in STARTS and not (tok.is_word("ELSE") and case):
                word = tok.upper
                allowed = (
                    (word == "SELECT" and (prev.is_word("UNION", "ALL", "EXCEPT", "INTERSECT")
                                           or (verb == "INSERT" and not seen_select)
                                           or (prev.is_word("AS") and verb != "SELECT")))
                    or (word == "SET" and verb == "UPDATE" and not seen_set)
                    or (word in ("UPDATE", "DELETE") and prev.is_word("ON"))
                    or (word == "IF" and self.peek().is_word("EXISTS")))
                if not allowed:
                    return self.pos
                seen_set = seen_set or word == "SET"
                seen_select = seen_select or word == "SELECT"
            if tok.is_word("VALUES"):
                seen_select = True  # INSERT ... VALUES takes no SELECT after it
            if tok.upper in REFUSED_FUNCTIONS:
                raise self.error(f"{tok.upper} reaches outside the database and is refused",
                                 number=REFUSED)
            self.advance()

    def plain(self) -> n.Stmt:
        first = self.tok
        start = self.pos
        verb = first.upper
        self.advance()
        end = self.scan_to_end(verb)
        return n.PlainSql(first.line, first.column, self.span(start, end), verb)

    # -- SELECT ----------------------------------------------------------------------------
    def select(self) -> n.Stmt:
        return self.subquery()

    def subquery(self) -> n.Select:
        first = self.expect_word("SELECT")
        start = self.pos - 1
        self.accept_word("ALL")
        if self.tok.is_word("DISTINCT"):
            self.pos = start + 1
            end = self.scan_to_end("SELECT")
            return n.Select(first.line, first.column, (), "", sql=self.span(start, end))
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
        return n.Select(first.line, first.column, tuple(items), self.span(rest_start, rest_end),
                        top, xml_path, self.span(start, end), top_sql)

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
                and tok.upper not in STARTS):
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
                self.tok.kind is Kind.WORD and self.tok.upper not in STARTS
                and self.tok.upper not in SELECT_CLAUSES):
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
                    or tok.upper in STARTS or tok.is_word("AS"))):
                return None
            depth += tok.is_op("(") - tok.is_op(")")
            self.advance()
