"""`python -m bench.floor`'s W1 send rows: the engine's own statements on a real broker
schema, and the same without the two writes that keep numbers."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bench import floor


def _messages_table(path: Path) -> tuple[str, list[str]]:
    with sqlite3.connect(path) as conn:
        table = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'sb_messages'"
                             ).fetchone()[0]
        indexes = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'sb_messages'"
            " ORDER BY name")]
    return table, indexes


def test_w1_send_runs_on_the_broker_schema_with_its_numbering_writes(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    assert floor.sbroker_w1_send(path, 200)["send"] > 0
    table, indexes = _messages_table(path)
    assert "AUTOINCREMENT" in table
    assert indexes == ["sb_messages_group", "sb_messages_ready"]
    with sqlite3.connect(path) as conn:  # bump_send_seq ran: 2 sends on each of 100 dialogs
        assert conn.execute("SELECT sum(send_seq) FROM sb_endpoints WHERE is_initiator = 1"
                            ).fetchone()[0] == 100 + 200


def test_the_bare_w1_send_drops_autoincrement_and_the_sequence_write_only(
        tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    assert floor.sbroker_w1_send(path, 200, bare=True)["send"] > 0
    table, indexes = _messages_table(path)
    assert "AUTOINCREMENT" not in table and "group_key" in table
    assert indexes == ["sb_messages_group", "sb_messages_ready"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM sb_messages").fetchone()[0] == 200
        assert conn.execute("SELECT sum(send_seq) FROM sb_endpoints WHERE is_initiator = 1"
                            ).fetchone()[0] == 100
