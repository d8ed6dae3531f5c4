"""Opening a file that is not a usable sbroker database raises ``sbroker.DatabaseError`` (a
``BrokerError``) that says what is wrong, and leaves the file exactly as it was."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from support.helpers import begin_and_send, make_pair

import sbroker
from sbroker import Broker


def _fingerprint(path: Path) -> tuple[str, list[str]]:
    """The file's bytes, and which files sit beside it (no -wal/-shm may appear or vanish)."""
    return (hashlib.sha256(path.read_bytes()).hexdigest(),
            sorted(p.name for p in path.parent.iterdir()))


def _foreign(path: Path) -> str:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices(total) VALUES (9.5)")
    conn.commit()
    conn.close()
    return "not an sbroker"


def _text(path: Path) -> str:
    path.write_text("name,total\nacme,9.5\n" * 200)
    return "not a usable SQLite database"


def _corrupt(path: Path) -> str:
    """A real sbroker database whose schema pages were overwritten."""
    with Broker.open(path) as b:
        make_pair(b)
        begin_and_send(b, "precious")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xa5" * (4096 - 100)
    path.write_bytes(bytes(data))
    return "not a usable SQLite database"


def _too_new(path: Path) -> str:
    with Broker.open(path):
        pass
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 999")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    return "newer than this sbroker"


@pytest.mark.parametrize("make", [_foreign, _text, _corrupt, _too_new],
                         ids=["foreign-sqlite", "not-sqlite", "corrupt", "newer-schema"])
def test_an_unusable_file_is_refused_with_a_clear_error_and_left_untouched(
    tmp_path: Path, make: Callable[[Path], str],
) -> None:
    path = tmp_path / "data.db"
    expected = make(path)
    before = _fingerprint(path)
    with pytest.raises(sbroker.DatabaseError) as caught:
        Broker.open(path)
    assert isinstance(caught.value, sbroker.BrokerError)
    assert str(path) in str(caught.value) and expected in str(caught.value)
    assert _fingerprint(path) == before


def test_a_missing_folder_is_refused_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "folder" / "data.db"
    with pytest.raises(sbroker.DatabaseError, match="does not exist"):
        Broker.open(path)
    assert not (tmp_path / "no").exists()


def test_the_foreign_database_still_works_for_its_owner_afterwards(tmp_path: Path) -> None:
    path = tmp_path / "data.db"
    _foreign(path)
    with pytest.raises(sbroker.DatabaseError):
        Broker.open(path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert conn.execute("SELECT total FROM invoices").fetchall() == [(9.5,)]
    conn.close()
