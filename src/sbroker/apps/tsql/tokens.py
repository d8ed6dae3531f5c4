"""The T-SQL tokenizer: text in, tokens with line and column out; never crashes, raises
``TSqlSyntaxError`` (with the position) on an unterminated string, identifier or comment.

Batches are split on ``GO`` standing alone on its line, as sqlcmd does, at the token level.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from sbroker.apps.tsql.errors import TSqlSyntaxError


class Kind(Enum):
    WORD = "word"          # identifier or keyword (value keeps its case)
    QUOTED = "quoted"      # [identifier] or "identifier"
    VAR = "variable"       # @name
    SYSVAR = "sysvar"      # @@name
    STRING = "string"      # 'text' or N'text' (value unescaped)
    NUMBER = "number"
    BINARY = "binary"      # 0x0A1B
    OP = "operator"
    EOF = "end"


@dataclass(frozen=True, slots=True)
class Token:
    kind: Kind
    value: str
    line: int
    column: int
    start: int
    end: int
    newline_before: bool = False  # first token on its line

    @property
    def upper(self) -> str:
        return self.value.upper() if self.kind is Kind.WORD else ""

    def is_word(self, *words: str) -> bool:
        return self.kind is Kind.WORD and self.value.upper() in words

    def is_op(self, *ops: str) -> bool:
        return self.kind is Kind.OP and self.value in ops

    def sql(self) -> str:
        """The token as T-SQL text again (strings and quoted names re-quoted)."""
        if self.kind is Kind.STRING:
            return "N'" + self.value.replace("'", "''") + "'"
        if self.kind is Kind.QUOTED:
            return "[" + self.value.replace("]", "]]") + "]"
        return self.value


OPERATORS = ("<>", "!=", ">=", "<=", "!<", "!>", "+=", "-=", "*=", "/=", "%=", "&=", "|=",
             "^=", "::", "=", "<", ">", "+", "-", "*", "/", "%", "&", "|", "^", "~", "(", ")",
             ",", ";", ".", ":")


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.line = 1
        self.col = 1
        self.fresh_line = True

    def error(self, message: str, line: int, col: int) -> TSqlSyntaxError:
        return TSqlSyntaxError(message, line=line, column=col)

    def advance(self, n: int) -> None:
        for ch in self.text[self.i:self.i + n]:
            if ch == "\n":
                self.line += 1
                self.col = 1
                self.fresh_line = True
            else:
                self.col += 1
        self.i += n

    def until(self, closing: str, start: int, what: str, line: int, col: int) -> str:
        """Text up to ``closing`` (doubled ``closing`` is an escaped one), consumed."""
        out: list[str] = []
        j = start
        n = len(self.text)
        while True:
            k = self.text.find(closing, j)
            if k < 0 or k >= n:
                raise self.error(f"unterminated {what}", line, col)
            out.append(self.text[j:k])
            if self.text.startswith(closing * 2, k):
                out.append(closing)
                j = k + 2
                continue
            self.advance(k + 1 - self.i)
            return "".join(out)

    def skip_space_and_comments(self) -> None:
        text = self.text
        while self.i < len(text):
            ch = text[self.i]
            if ch.isspace():
                self.advance(1)
            elif text.startswith("--", self.i):
                k = text.find("\n", self.i)
                self.advance((len(text) if k < 0 else k) - self.i)
            elif text.startswith("/*", self.i):
                self.block_comment()
            else:
                return

    def block_comment(self) -> None:
        line, col = self.line, self.col
        depth = 0
        while True:
            if self.i >= len(self.text):
                raise self.error("unterminated /* comment", line, col)
            if self.text.startswith("/*", self.i):
                depth += 1
                self.advance(2)
            elif self.text.startswith("*/", self.i):
                depth -= 1
                self.advance(2)
                if depth == 0:
                    return
            else:
                self.advance(1)

    def next(self) -> Token:
        self.skip_space_and_comments()
        line, col, start = self.line, self.col, self.i
        fresh = self.fresh_line
        self.fresh_line = False
        text = self.text
        if self.i >= len(text):
            return Token(Kind.EOF, "", line, col, start, start, fresh)
        kind, value = self.scan(text[self.i], line, col)
        return Token(kind, value, line, col, start, self.i, fresh)

    def scan(self, ch: str, line: int, col: int) -> tuple[Kind, str]:
        text = self.text
        nxt = text[self.i + 1] if self.i + 1 < len(text) else ""
        if ch in "Nn" and nxt == "'":
            self.advance(1)
            return Kind.STRING, self.until("'", self.i + 1, "string", line, col)
        if ch == "'":
            return Kind.STRING, self.until("'", self.i + 1, "string", line, col)
        if ch == "[":
            return Kind.QUOTED, self.until("]", self.i + 1, "[identifier]", line, col)
        if ch == '"':
            return Kind.QUOTED, self.until('"', self.i + 1, '"identifier"', line, col)
        if ch == "0" and nxt and nxt in "xX":
            return Kind.BINARY, self.word(self.i + 2, hexdigits=True)
        if ch.isdigit() or (ch == "." and nxt.isdigit()):
            return Kind.NUMBER, self.number()
        if ch == "@":
            kind = Kind.SYSVAR if nxt == "@" else Kind.VAR
            name = self.word(self.i + (2 if kind is Kind.SYSVAR else 1))
            return kind, name
        if ch.isalpha() or ch in "_#$":
            return Kind.WORD, self.word(self.i)
        for op in OPERATORS:
            if text.startswith(op, self.i):
                self.advance(len(op))
                return Kind.OP, op
        raise self.error(f"unexpected character {ch!r}", line, col)

    def word(self, j: int, *, hexdigits: bool = False) -> str:
        text = self.text
        k = j
        while k < len(text) and (text[k].isalnum() or text[k] in "_#$@"):
            if hexdigits and text[k] not in "0123456789abcdefABCDEF":
                break
            k += 1
        value = text[self.i:k]
        self.advance(k - self.i)
        return value

    def number(self) -> str:
        text = self.text
        k = self.i
        while k < len(text) and text[k].isdigit():
            k += 1
        if k < len(text) and text[k] == ".":
            k += 1
            while k < len(text) and text[k].isdigit():
                k += 1
        if k < len(text) and text[k] in "eE" and k + 1 < len(text) and (
                text[k + 1].isdigit() or text[k + 1] in "+-"):
            k += 2
            while k < len(text) and text[k].isdigit():
                k += 1
        value = text[self.i:k]
        self.advance(k - self.i)
        return value


def tokenize(text: str) -> list[Token]:
    """Every token of ``text``, ending with one EOF token."""
    lexer = _Lexer(text)
    out: list[Token] = []
    while True:
        token = lexer.next()
        out.append(token)
        if token.kind is Kind.EOF:
            return out


@dataclass(frozen=True, slots=True)
class Batch:
    """One batch of a script: its number (1-based), its text and its tokens."""

    number: int
    tokens: list[Token]
    text: str


def split_batches(text: str) -> list[Batch]:
    """The batches of a script, separated by ``GO`` alone on its line (``GO n`` repeats)."""
    tokens = tokenize(text)
    batches: list[Batch] = []
    current: list[Token] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.kind is Kind.EOF or (tok.is_word("GO") and tok.newline_before and _ends_line(
                tokens, i)):
            count = 1
            if tok.kind is not Kind.EOF and tokens[i + 1].kind is Kind.NUMBER and (
                    not tokens[i + 1].newline_before):
                count = max(1, int(float(tokens[i + 1].value)))
                i += 1
            if any(t.kind is not Kind.OP or t.value != ";" for t in current):
                eof = Token(Kind.EOF, "", tok.line, tok.column, tok.start, tok.start)
                for _ in range(count):
                    batches.append(Batch(len(batches) + 1, [*current, eof], text))
            current = []
            if tok.kind is Kind.EOF:
                return batches
        else:
            current.append(tok)
        i += 1
    return batches


def _ends_line(tokens: list[Token], i: int) -> bool:
    """GO is followed by the end, a new line, or a repeat count and then one of those."""
    after = tokens[i + 1]
    if after.kind is Kind.NUMBER and not after.newline_before:
        after = tokens[i + 2]
    return after.kind is Kind.EOF or after.newline_before or after.is_op(";")
