"""The SQLite connector: opening and checking the file, its numbered migrations, and a pool
of connections (each a :class:`SqliteConnection`)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

from sbroker.core.errors import DatabaseError, InvalidArgumentError
from sbroker.storage.migrate import migrations, statements
from sbroker.storage.sqlite.checkpoint import SAFETY_PAGES
from sbroker.storage.sqlite.connection import SqliteConnection

APPLICATION_ID = 0x53425231  # "SBR1": marks a file as an sbroker database
MIGRATIONS = migrations("sbroker.storage.sqlite")
DURABILITY = {"full": "FULL", "normal": "NORMAL", "off": "OFF"}
BUSY_TIMEOUT_MS = 60_000


def parse_target(target: str | os.PathLike[str]) -> tuple[Path, bool]:
    """(file path, is_temporary) for ``Broker.open``'s target."""
    text = os.fspath(target)
    if text == ":memory:":
        fd, name = tempfile.mkstemp(prefix="sbroker-mem-", suffix=".db")
        os.close(fd)
        os.unlink(name)
        return Path(name), True
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]  # sqlite:///relative.db; sqlite:////absolute.db
    elif "://" in text:
        scheme = text.split("://", 1)[0]
        raise InvalidArgumentError(
            f"unsupported database URL scheme {scheme!r}: use a file path, sqlite:///path or"
            " postgresql://user@host/dbname")
    if not text:
        raise InvalidArgumentError("empty database path: give a file path or ':memory:'")
    return Path(text), False


def schema_of(path: Path) -> list[str]:
    """Every table, index, view and trigger of a file, as SQLite stores its SQL (white space
    folded), in a stable order: what ``schema.sql`` holds."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_schema WHERE sql IS NOT NULL"
            " AND name != 'sqlite_sequence' ORDER BY type, name").fetchall()
    return [f"-- {kind} {name}\n{' '.join(sql.split())};" for kind, name, sql in rows]


class Connector:
    """One SQLite file in WAL mode, a pool of connections, and the schema it must carry."""

    def __init__(self, path: Path, *, durability: str = "normal", temporary: bool = False) -> None:
        if durability not in DURABILITY:
            raise InvalidArgumentError(
                f"unknown durability {durability!r}: use 'full' (fsync each commit) or 'normal'"
            )
        self.path = path
        self.durability = durability
        self.temporary = temporary
        self.sync = DURABILITY[durability]
        self._pool: list[SqliteConnection] = []
        self._lock = threading.Lock()
        self._closed = False
        if path.parent and not path.parent.exists():
            raise DatabaseError(f"cannot create {path}: the folder {path.parent} does not exist")
        if path.exists() and path.stat().st_size > 0:
            self._check_existing()  # before connect switches the file to WAL mode
        conn = self.connect()
        try:
            self._migrate(conn)
        except BaseException:
            conn.close()
            raise
        self._pool.append(conn)

    # -- connections -------------------------------------------------------------------
    def connect(self) -> SqliteConnection:
        """A new connection (the pool's, the writer's, the checkpointer's, a poller's)."""
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                   timeout=60, factory=SqliteConnection)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise DatabaseError(f"{self.path}: could not switch the database to WAL mode")
            conn.execute(f"PRAGMA synchronous = {self.sync}")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA temp_store = MEMORY")
            conn.execute("PRAGMA cache_size = -16000")
            # Checkpoints run in the checkpointer's thread; inline only past SAFETY_PAGES.
            conn.execute(f"PRAGMA wal_autocheckpoint = {SAFETY_PAGES}")
        except sqlite3.DatabaseError as exc:
            raise DatabaseError(f"{self.path} is not a usable SQLite database: {exc}") from None
        return conn

    def acquire(self) -> SqliteConnection:
        """A pooled connection for the caller's exclusive use until :meth:`release`."""
        with self._lock:
            if self._closed:
                raise DatabaseError("the broker is closed")
            if self._pool:
                return self._pool.pop()
        return self.connect()

    def release(self, conn: SqliteConnection) -> None:
        if conn.in_transaction:
            conn.rollback()
        with self._lock:
            if not self._closed:
                self._pool.append(conn)
                return
        conn.close()

    @contextlib.contextmanager
    def read(self) -> Iterator[SqliteConnection]:
        conn = self.acquire()
        try:
            yield conn
        finally:
            self.release(conn)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            # Connections a transaction still uses are closed by release(): closing one
            # under a running statement in another thread can crash the interpreter.
            conns, self._pool = self._pool, []
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        if self.temporary:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{self.path}{suffix}")

    # -- schema --------------------------------------------------------------------------
    def _check_existing(self) -> None:
        """Refuse a foreign, corrupt or too new file through a read-only connection."""
        try:
            conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise DatabaseError(f"{self.path} could not be opened: {exc}") from None
        try:
            self._version(conn)
        finally:
            conn.close()

    def _version(self, conn: sqlite3.Connection) -> int:
        """The file's schema version, if it is an sbroker database (or an empty one)."""
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise DatabaseError(f"{self.path} is not a usable SQLite database: {exc}") from None
        if app_id != APPLICATION_ID and (tables or app_id):
            raise DatabaseError(
                f"{self.path} is an SQLite database but not an sbroker one "
                "(open a new file, or one made by sbroker)"
            )
        if version > len(MIGRATIONS):
            raise DatabaseError(
                f"{self.path} has schema version {version}, newer than this sbroker "
                f"({len(MIGRATIONS)}): upgrade sbroker"
            )
        return int(version)

    def _migrate(self, conn: SqliteConnection) -> None:
        """Apply the migrations the file lacks, in one transaction."""
        if self._version(conn) == len(MIGRATIONS):
            return
        conn.begin(write=True)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            for migration in MIGRATIONS[version:]:
                for statement in statements(migration.text, sqlite3.complete_statement):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {migration.number}")
            if version == 0:
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(conn.sql.new_database, (str(uuid.uuid4()).upper(),))
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
