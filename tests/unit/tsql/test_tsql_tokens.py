"""The T-SQL tokenizer and the GO splitter: positions, quoting, comments, and no crash on
any input (only a TSqlSyntaxError with a line and a column)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sbroker.apps.tsql.errors import TSqlSyntaxError
from sbroker.apps.tsql.tokens import Kind, split_batches, tokenize


def kinds(text: str) -> list[tuple[Kind, str]]:
    return [(t.kind, t.value) for t in tokenize(text)[:-1]]


def test_tokens_with_their_lines_and_columns() -> None:
    tokens = tokenize("select @a,\n  @@spid -- note\n"
                      "  [odd name], N'it''s' /* a /* nested */ */ 0x0A")
    assert [(t.kind, t.value, t.line, t.column) for t in tokens[:-1]] == [
        (Kind.WORD, "select", 1, 1), (Kind.VAR, "@a", 1, 8), (Kind.OP, ",", 1, 10),
        (Kind.SYSVAR, "@@spid", 2, 3), (Kind.QUOTED, "odd name", 3, 3), (Kind.OP, ",", 3, 13),
        (Kind.STRING, "it's", 3, 15), (Kind.BINARY, "0x0A", 3, 45)]


def test_numbers_and_operators() -> None:
    assert kinds("1.5e3 <> 2 >= .5 += 0") == [
        (Kind.NUMBER, "1.5e3"), (Kind.OP, "<>"), (Kind.NUMBER, "2"), (Kind.OP, ">="),
        (Kind.NUMBER, ".5"), (Kind.OP, "+="), (Kind.NUMBER, "0")]


def test_an_unterminated_string_names_where_it_starts() -> None:
    try:
        tokenize("select 1\n  print 'oops")
    except TSqlSyntaxError as exc:
        assert (exc.line, exc.column) == (2, 9)
        assert "unterminated string" in exc.message
    else:
        raise AssertionError("no error")


def test_go_alone_on_its_line_splits_batches() -> None:
    text = "select 1\nGO\nselect 'go'\n  go  \nprint go_on\ngo 2\n"
    batches = split_batches(text)
    assert [b.number for b in batches] == [1, 2, 3, 4]
    assert [[t.value for t in b.tokens[:-1]] for b in batches] == [
        ["select", "1"], ["select", "go"], ["print", "go_on"], ["print", "go_on"]]


def test_empty_batches_are_dropped() -> None:
    assert split_batches("go\n\ngo\n-- only a comment\ngo") == []


@given(st.text())
def test_the_tokenizer_never_crashes(text: str) -> None:
    try:
        tokens = tokenize(text)
    except TSqlSyntaxError as exc:
        assert exc.line is not None and exc.line >= 1
        assert exc.column is not None and exc.column >= 1
        return
    assert tokens[-1].kind is Kind.EOF
    assert all(t.start <= t.end for t in tokens)


@given(st.lists(st.sampled_from(["select", "@x", "'a''b'", "[c]", "--x\n", "/*y*/", "go",
                                 "\n", " ", "(", ")", ",", "1.5", "N'z'", "@@spid", ";"])))
def test_split_batches_never_crashes_on_sql_like_text(parts: list[str]) -> None:
    batches = split_batches("".join(parts))
    assert all(b.tokens[-1].kind is Kind.EOF for b in batches)
