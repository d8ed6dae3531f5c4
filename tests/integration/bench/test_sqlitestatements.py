"""`python -m bench.sqlitestatements` runs end to end and prints, for each phase, the engine's
statements per message beside the embedded peer's whole time in the same run. The peers
(litequeue, huey) come with the `bench` extra, which the test environment does not install:
here a stand-in gives the peer's time, and a missing peer leaves sbroker's figures alone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import sqlitestatements
from bench.systems.huey import Huey
from bench.systems.litequeue import LiteQueue


def _title(out: str, phase: str, k: int, n: int) -> re.Match[str]:
    found = re.search(rf"^{phase}, {k} per transaction \({n:,} msgs, median of 1\): sbroker"
                      r" ([\d,.]+) µs per message, of which its statements ([\d,.]+)(.*)$",
                      out, re.MULTILINE)
    assert found, out
    whole, statements = (float(found.group(i).replace(",", "")) for i in (1, 2))
    assert 0 < statements < whole  # the statements are timed inside the transaction's time
    return found


@pytest.fixture
def peer_takes_25_us(monkeypatch: pytest.MonkeyPatch) -> None:
    """The peer as if installed, taking 25 µs per message in every phase it has."""
    for system in (LiteQueue, Huey):
        monkeypatch.setattr(system, "module", "")  # nothing to import: check() passes

    def fake(_workdir: Path, n: int, k: int) -> dict[str, float]:
        return {"send": n * 25e-6} if k > 1 else {"send": n * 25e-6, "receive": n * 25e-6}

    monkeypatch.setattr(sqlitestatements, "_peer_run", fake)


@pytest.mark.usefixtures("peer_takes_25_us")
def test_w2_shape_shows_each_statement_beside_litequeue(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert sqlitestatements.main(["-n", "300", "-k", "100", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"run 1/1    send: sbroker +[\d,]+ msgs/s, litequeue +40,000 msgs/s", out)
    assert re.search(r"run 1/1 receive: sbroker +[\d,]+ msgs/s$", out, re.MULTILINE)
    send = _title(out, "send", 100, 300)
    peer = re.fullmatch(r"; litequeue 25\.0 µs per message\. The statements alone: ([\d.]+)x"
                        r" the peer's speed; sbroker whole: ([\d.]+)x", send.group(3))
    assert peer, send.group(3)
    statements, whole = (float(send.group(i).replace(",", "")) for i in (2, 1))
    assert float(peer.group(1)) == pytest.approx(25 / statements, abs=0.006)
    assert float(peer.group(2)) == pytest.approx(25 / whole, abs=0.006)
    assert "executemany INSERT INTO sb_messages" in out and "COMMIT" in out
    assert "the rest of the transaction's thread" in out
    assert _title(out, "receive", 100, 300).group(3) == ""  # litequeue has no batch receive


@pytest.mark.usefixtures("peer_takes_25_us")
def test_w1_shape_compares_with_huey_both_ways(capsys: pytest.CaptureFixture[str]) -> None:
    assert sqlitestatements.main(["-n", "40", "-k", "1", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    for phase in ("send", "receive"):
        assert re.search(rf"run 1/1 +{phase}: sbroker +[\d,]+ msgs/s, huey +40,000 msgs/s",
                         out), out
        assert _title(out, phase, 1, 40).group(3).startswith("; huey 25.0 µs per message.")


def test_a_missing_peer_leaves_sbroker_alone_and_says_so(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(LiteQueue, "module", "sbroker_tests_no_such_module")
    assert sqlitestatements.main(["-n", "200", "-k", "100", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "sbroker_tests_no_such_module not importable" in out
    assert "sbroker alone in this run, no peer to compare with" in out
    assert _title(out, "send", 100, 200).group(3) == ""


def test_rows_read_like_the_cursor_they_replace() -> None:
    rows = sqlitestatements.Rows([(1,), (2,), (3,)], -1)
    assert rows.fetchone() == (1,)
    assert list(rows) == [(2,), (3,)]
    assert rows.fetchone() is None and rows.fetchall() == []


def test_bad_sizes_are_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        sqlitestatements.main(["-n", "5", "-k", "10"])
    assert "-n and -k must be positive" in capsys.readouterr().err
