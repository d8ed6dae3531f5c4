"""The token stream and the expression grammar of T-SQL (precedence climbing), the base of
the statement parser."""

from __future__ import annotations

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql.errors import REFUSED, UNSUPPORTED, TSqlSyntaxError
from sbroker.apps.tsql.tokens import Kind, Token

COMPARISONS = ("=", "<>", "!=", "<", ">", "<=", ">=", "!<", "!>")
ADDITIVE = ("+", "-", "&", "|", "^")
MULTIPLICATIVE = ("*", "/", "%")
#: Functions that reach outside the database: refused wherever they appear.
REFUSED_FUNCTIONS = ("OPENROWSET", "OPENDATASOURCE", "OPENQUERY", "OPENXML")


class TokenStream:
    """Tokens of one batch with a cursor, and the helpers every grammar rule uses."""

    def __init__(self, tokens: list[Token], text: str) -> None:
        self.tokens = tokens
        self.text = text
        self.pos = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.pos]

    def peek(self, k: int = 1) -> Token:
        return self.tokens[min(self.pos + k, len(self.tokens) - 1)]

    def advance(self) -> Token:
        tok = self.tokens[self.pos]
        if tok.kind is not Kind.EOF:
            self.pos += 1
        return tok

    def error(self, message: str, tok: Token | None = None, *,
              number: int | None = None) -> TSqlSyntaxError:
        tok = tok or self.tok
        near = "the end of the batch" if tok.kind is Kind.EOF else repr(self.source(tok))
        return TSqlSyntaxError(f"{message} near {near}", line=tok.line, column=tok.column,
                               **({"number": number} if number else {}))

    def unsupported(self, what: str, tok: Token | None = None) -> TSqlSyntaxError:
        return self.error(f"{what} is not supported by sbroker", tok, number=UNSUPPORTED)

    def source(self, tok: Token) -> str:
        return self.text[tok.start:tok.end]

    def span(self, start: int, end: int) -> str:
        """The original text of tokens ``start`` .. ``end - 1``."""
        if end <= start:
            return ""
        return self.text[self.tokens[start].start:self.tokens[end - 1].end]

    def accept_word(self, *words: str) -> Token | None:
        if self.tok.is_word(*words):
            return self.advance()
        return None

    def accept_op(self, *ops: str) -> Token | None:
        if self.tok.is_op(*ops):
            return self.advance()
        return None

    def expect_word(self, *words: str) -> Token:
        tok = self.accept_word(*words)
        if tok is None:
            raise self.error(f"expected {' or '.join(words)}")
        return tok

    def expect_op(self, op: str) -> Token:
        tok = self.accept_op(op)
        if tok is None:
            raise self.error(f"expected {op!r}")
        return tok

    def name(self) -> str:
        """An identifier: a word or a [quoted] name."""
        tok = self.tok
        if tok.kind in (Kind.WORD, Kind.QUOTED):
            self.advance()
            return tok.value
        raise self.error("expected a name")

    def dotted_name(self) -> str:
        """``a.b.c`` as its last part; leading database/schema parts are dropped."""
        parts = [self.name()]
        while self.tok.is_op(".") and self.peek().kind in (Kind.WORD, Kind.QUOTED):
            self.advance()
            parts.append(self.name())
        return parts[-1]

    def name_or_string(self) -> str:
        if self.tok.kind is Kind.STRING:
            return self.advance().value
        return self.dotted_name()

    def variable(self) -> str:
        tok = self.tok
        if tok.kind is not Kind.VAR:
            raise self.error("expected a @variable")
        self.advance()
        return var_name(tok)


def var_name(tok: Token) -> str:
    return tok.value[1:].lower()


class ExprParser(TokenStream):
    """Expressions; a subquery's SELECT is read by ``query``, which the statement parser
    gives."""

    def query(self) -> n.Query:
        raise NotImplementedError

    def expression(self) -> n.Expr:
        return self._or()

    def _or(self) -> n.Expr:
        left = self._and()
        while self.accept_word("OR"):
            left = n.Binary("OR", left, self._and())
        return left

    def _and(self) -> n.Expr:
        left = self._not()
        while self.accept_word("AND"):
            left = n.Binary("AND", left, self._not())
        return left

    def _not(self) -> n.Expr:
        if self.accept_word("NOT"):
            return n.Unary("NOT", self._not())
        return self._comparison()

    def _comparison(self) -> n.Expr:
        left = self._additive()
        while True:
            if self.tok.is_op(*COMPARISONS):
                op = self.advance().value
                left = n.Binary({"!=": "<>", "!<": ">=", "!>": "<="}.get(op, op), left,
                                self._additive())
                continue
            if self.accept_word("IS"):
                negated = self.accept_word("NOT") is not None
                self.expect_word("NULL")
                left = n.IsNull(left, negated)
                continue
            negated = False
            if self.tok.is_word("NOT") and self.peek().is_word("IN", "LIKE", "BETWEEN"):
                self.advance()
                negated = True
            if self.accept_word("IN"):
                left = n.InList(left, self._in_items(), negated)
            elif self.accept_word("LIKE"):
                like: n.Expr = n.Binary("LIKE", left, self._additive())
                left = n.Unary("NOT", like) if negated else like
            elif self.accept_word("BETWEEN"):
                low = self._additive()
                self.expect_word("AND")
                left = n.Between(left, low, self._additive(), negated)
            else:
                return left

    def _in_items(self) -> tuple[n.Expr, ...]:
        self.expect_op("(")
        if self.tok.is_word("SELECT"):
            raise self.unsupported("IN (SELECT ...) in a procedural expression")
        items = [self.expression()]
        while self.accept_op(","):
            items.append(self.expression())
        self.expect_op(")")
        return tuple(items)

    def _additive(self) -> n.Expr:
        left = self._multiplicative()
        while self.tok.is_op(*ADDITIVE):
            op = self.advance().value
            left = n.Binary(op, left, self._multiplicative())
        return left

    def _multiplicative(self) -> n.Expr:
        left = self._unary()
        while self.tok.is_op(*MULTIPLICATIVE):
            op = self.advance().value
            left = n.Binary(op, left, self._unary())
        return left

    def _unary(self) -> n.Expr:
        if self.tok.is_op("-", "+", "~"):
            op = self.advance().value
            return n.Unary(op, self._unary())
        return self._postfix(self._primary())

    def _postfix(self, expr: n.Expr) -> n.Expr:
        while self.tok.is_op(".") and self.peek().kind is Kind.WORD and self.peek(2).is_op("("):
            self.advance()
            method = self.advance().value.lower()
            expr = n.Method(expr, method, self._args())
        return expr

    def _args(self) -> tuple[n.Expr, ...]:
        self.expect_op("(")
        if self.accept_op(")"):
            return ()
        if self.tok.is_op("*") and self.peek().is_op(")"):  # COUNT(*)
            self.advance()
            self.advance()
            return (n.Column("*"),)
        self.accept_word("DISTINCT")
        args = [self.expression()]
        while self.accept_op(","):
            args.append(self.expression())
        self.expect_op(")")
        return tuple(args)

    def _primary(self) -> n.Expr:
        tok = self.tok
        if tok.kind is Kind.NUMBER:
            self.advance()
            text = tok.value
            return n.Literal(float(text) if any(c in text for c in ".eE") else int(text))
        if tok.kind is Kind.STRING:
            self.advance()
            return n.Literal(tok.value)
        if tok.kind is Kind.BINARY:
            self.advance()
            digits = tok.value[2:]
            return n.Literal(bytes.fromhex(digits if len(digits) % 2 == 0 else "0" + digits))
        if tok.kind is Kind.VAR:
            self.advance()
            return n.Var(var_name(tok))
        if tok.kind is Kind.SYSVAR:
            self.advance()
            return n.SysVar(tok.value[2:].upper())
        if tok.is_op("("):
            return self._parenthesized()
        if tok.kind is Kind.WORD:
            return self._word()
        if tok.kind is Kind.QUOTED:
            return n.Column(self.dotted_name().lower())
        raise self.error("expected an expression")

    def _parenthesized(self) -> n.Expr:
        self.advance()
        if self.tok.is_word("SELECT"):
            select = self.query()
            self.expect_op(")")
            return n.Subquery(select)
        inner = self.expression()
        self.expect_op(")")
        return inner

    def _word(self) -> n.Expr:
        tok = self.tok
        word = tok.upper
        if word == "NULL":
            self.advance()
            return n.Literal(None)
        if word == "CASE":
            return self._case()
        if word == "EXISTS" and self.peek().is_op("("):
            self.advance()
            self.advance()
            select = self.query()
            self.expect_op(")")
            return n.Exists(select)
        if word in ("CAST", "TRY_CAST") and self.peek().is_op("("):
            self.advance()
            self.advance()
            operand = self.expression()
            self.expect_word("AS")
            type_name = self.type_name()
            self.expect_op(")")
            return n.Cast(operand, type_name.name)
        if word in ("CONVERT", "TRY_CONVERT") and self.peek().is_op("("):
            self.advance()
            self.advance()
            type_name = self.type_name()
            self.expect_op(",")
            operand = self.expression()
            style = self.expression() if self.accept_op(",") else None
            self.expect_op(")")
            return n.Cast(operand, type_name.name, style)
        if word in REFUSED_FUNCTIONS:
            raise self.error(f"{word} reaches outside the database and is refused",
                             number=REFUSED)
        if self.peek().is_op("("):
            self.advance()
            return n.Call(word, self._args())
        return n.Column(self.dotted_name().lower())

    def _case(self) -> n.Expr:
        self.advance()
        operand = None if self.tok.is_word("WHEN") else self.expression()
        whens = []
        while self.accept_word("WHEN"):
            cond = self.expression()
            self.expect_word("THEN")
            whens.append((cond, self.expression()))
        default = self.expression() if self.accept_word("ELSE") else None
        self.expect_word("END")
        return n.Case(operand, tuple(whens), default)

    def type_name(self) -> n.TypeName:
        """``nvarchar(max)``, ``decimal(10, 2)``, ``sys.sysname``, ``datetime2(7)``."""
        name = self.dotted_name().upper()
        args: list[str] = []
        if self.accept_op("("):
            while not self.accept_op(")"):
                tok = self.advance()
                if tok.kind is Kind.EOF:
                    raise self.error("unterminated type arguments")
                if not tok.is_op(","):
                    args.append(tok.value.upper())
        if name in ("DOUBLE",) and self.accept_word("PRECISION"):
            name = "FLOAT"
        return n.TypeName(name, tuple(args))
