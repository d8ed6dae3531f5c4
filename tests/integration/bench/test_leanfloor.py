"""`python -m bench.leanfloor`'s SQL-alone designs keep the queue's promises: every message
once, each conversation's in msn order from its sender's next number, nothing left ready."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from bench import lean


def _deliver(q: lean.Queue, sends_one: int, batches: int, top: int) -> dict[object, list[int]]:
    for i in range(sends_one):
        q.send_one(i)
    for j in range(batches):
        q.send_batch(j * lean.BATCH)
    got: dict[object, list[int]] = {}
    while q.receive(top):
        for conversation, msn in q.received:
            got.setdefault(conversation, []).append(msn)
    return got


@pytest.mark.parametrize("design", list(lean.DESIGNS))
@pytest.mark.parametrize("top", [1, lean.BATCH])
def test_every_message_once_and_in_order(tmp_path: Path, design: str, top: int) -> None:
    make: Callable[..., lean.Queue] = lean.DESIGNS[design]
    q = make(tmp_path / "f.db", checkpoints=False)
    try:
        got = _deliver(q, sends_one=250, batches=3, top=top)
    finally:
        q.close()
    assert len(got) == lean.GROUPS
    # msn 0 went at setup; each dialog then took 2 or 3 single sends and 3 from the batches
    assert sorted(len(m) for m in got.values()) == [5] * 50 + [6] * 50
    assert all(m == list(range(1, len(m) + 1)) for m in got.values())


@pytest.mark.parametrize("design", [d for d in lean.DESIGNS if d != "today's SQL"])
def test_the_lean_queue_ends_empty_with_numbers_kept(tmp_path: Path, design: str) -> None:
    q = lean.DESIGNS[design](tmp_path / "f.db", checkpoints=False)
    try:
        _deliver(q, sends_one=0, batches=2, top=lean.BATCH)
        for i in range(lean.GROUPS):  # the next send on each dialog is numbered 3
            q.send_one(i)
        q.receive(1)
        assert q.received[0][1] == 3
    finally:
        q.close()
    with sqlite3.connect(tmp_path / "f.db") as conn:
        live = conn.execute("SELECT count(*) FROM lean_m WHERE id NOT IN"
                            " (SELECT id FROM lean_consumed)").fetchone()[0]
        ready = conn.execute("SELECT count(*) FROM lean_ready").fetchone()[0]
    assert (live, ready) == (lean.GROUPS - 1, lean.GROUPS - 1)  # that group had no more


def test_pages_are_counted_for_every_shape(tmp_path: Path) -> None:
    got = lean.pages(lean.DESIGNS["lean SQL, bucketed"], tmp_path / "f.db", queued=2_000,
                     commits=5)
    assert set(got) == {"W1 send", "W1 receive", "W2 send", "W2 receive"}
    assert all(v >= 1 for v in got.values())
