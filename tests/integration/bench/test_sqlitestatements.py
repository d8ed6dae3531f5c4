"""`python -m bench.sqlitestatements` runs end to end and prints, for each phase, the engine's
statements per message beside the embedded peer's whole time in the same run."""

from __future__ import annotations

import re

import pytest

from bench import sqlitestatements


def _title(out: str, phase: str) -> re.Match[str]:
    found = re.search(rf"^{phase}, (\d+) per transaction \(([\d,]+) msgs, median of 1\): sbroker"
                      r" ([\d,.]+) µs per message, of which its statements ([\d,.]+)", out,
                      re.MULTILINE)
    assert found, out
    return found


def test_w2_shape_shows_each_statement_and_litequeue(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert sqlitestatements.main(["-n", "300", "-k", "100", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"run 1/1    send: sbroker +[\d,]+ msgs/s, litequeue +[\d,]+ msgs/s", out)
    assert re.search(r"run 1/1 receive: sbroker +[\d,]+ msgs/s$", out, re.MULTILINE)
    send = _title(out, "send")
    whole, statements = (float(send.group(i).replace(",", "")) for i in (3, 4))
    assert 0 < statements < whole  # the statements are timed inside the transaction's time
    assert "litequeue" in out[send.start():send.start() + 400]
    assert "executemany INSERT INTO sb_messages" in out and "COMMIT" in out
    assert "the rest of the transaction's thread" in out
    _title(out, "receive")


def test_w1_shape_compares_with_huey_both_ways(capsys: pytest.CaptureFixture[str]) -> None:
    assert sqlitestatements.main(["-n", "40", "-k", "1", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    for phase in ("send", "receive"):
        assert re.search(rf"run 1/1 +{phase}: sbroker +[\d,]+ msgs/s, huey +[\d,]+ msgs/s",
                         out), out
        found = _title(out, phase)
        assert "huey" in out[found.start():found.start() + 400]


def test_rows_read_like_the_cursor_they_replace() -> None:
    rows = sqlitestatements.Rows([(1,), (2,), (3,)], -1)
    assert rows.fetchone() == (1,)
    assert list(rows) == [(2,), (3,)]
    assert rows.fetchone() is None and rows.fetchall() == []


def test_bad_sizes_are_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        sqlitestatements.main(["-n", "5", "-k", "10"])
    assert "-n and -k must be positive" in capsys.readouterr().err
