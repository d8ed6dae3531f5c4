"""The SQLite connector: opening and checking the file, migrations, a connection pool,
short write transactions, and process sessions whose liveness other processes can check."""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import tempfile
import threading
import uuid
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from sbroker.core.errors import DatabaseError, InvalidArgumentError
from sbroker.storage.sqlite.checkpoint import SAFETY_PAGES, Checkpointer
from sbroker.storage.sqlite.sweeper import Sweeper
from sbroker.storage.sqlite.writer import Writer

APPLICATION_ID = 0x53425231  # "SBR1": marks a file as an sbroker database
MIGRATIONS = ("0001_initial.sql", "0002_views.sql", "0003_consumed.sql", "0004_operations.sql",
              "0005_streams.sql")
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
        text = text[len("sqlite:///") :]
        if not text.startswith("/"):
            text = text  # sqlite:///relative.db is relative; sqlite:////abs is absolute
    elif "://" in text:
        scheme = text.split("://", 1)[0]
        raise InvalidArgumentError(
            f"unsupported database URL scheme {scheme!r}: use a file path or sqlite:///path"
        )
    if not text:
        raise InvalidArgumentError("empty database path: give a file path or ':memory:'")
    return Path(text), False


def process_start_token(pid: int) -> str:
    """Something that changes if ``pid`` is reused by another process (Linux: start time)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
        return data.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def process_alive(pid: int, start_token: str, host: str) -> bool:
    """Whether the process that registered a session still runs (same host only)."""
    if host != socket.gethostname():
        return True  # cannot tell: assume alive (SQLite files are not shared across hosts)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    token = process_start_token(pid)
    return token == "?" or start_token == "?" or token == start_token


class Database:
    """One SQLite file in WAL mode, a pool of connections, and the schema it must carry."""

    def __init__(self, path: Path, *, durability: str = "normal", temporary: bool = False) -> None:
        if durability not in DURABILITY:
            raise InvalidArgumentError(
                f"unknown durability {durability!r}: use 'full' (fsync each commit) or 'normal'"
            )
        self.path = path
        self.durability = durability
        self.temporary = temporary
        self._sync = DURABILITY[durability]
        self._pool: list[sqlite3.Connection] = []
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        if path.parent and not path.parent.exists():
            raise DatabaseError(f"cannot create {path}: the folder {path.parent} does not exist")
        if path.exists() and path.stat().st_size > 0:
            self._check_existing()  # before _connect switches the file to WAL mode
        conn = self._connect()
        try:
            self._check_and_migrate(conn)
        except BaseException:
            conn.close()
            raise
        self._release_new(conn)
        self.checkpointer = Checkpointer(self._connect)
        self.sweeper = Sweeper()
        self.writer = Writer(self._connect, self._sync, on_commit=self.checkpointer.committed)

    # -- connections -------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=60
            )
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise DatabaseError(f"{self.path}: could not switch the database to WAL mode")
            conn.execute(f"PRAGMA synchronous = {self._sync}")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA temp_store = MEMORY")
            conn.execute("PRAGMA cache_size = -16000")
            # Checkpoints run in the checkpointer's thread; inline only past SAFETY_PAGES.
            conn.execute(f"PRAGMA wal_autocheckpoint = {SAFETY_PAGES}")
        except sqlite3.DatabaseError as exc:
            raise DatabaseError(f"{self.path} is not a usable SQLite database: {exc}") from None
        return conn

    def _release_new(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            self._all.append(conn)
            self._pool.append(conn)

    def acquire(self) -> sqlite3.Connection:
        """A connection for the caller's exclusive use until :meth:`release`."""
        with self._lock:
            if self._closed:
                raise DatabaseError("the broker is closed")
            if self._pool:
                return self._pool.pop()
        conn = self._connect()
        with self._lock:
            self._all.append(conn)
        return conn

    def release(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        with self._lock:
            if not self._closed:
                self._pool.append(conn)
                return
        conn.close()

    @contextlib.contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        conn = self.acquire()
        try:
            yield conn
        finally:
            self.release(conn)

    def close(self) -> None:
        self.writer.close()
        self.checkpointer.close()
        with self._lock:
            self._closed = True
            # Connections a transaction still uses are closed by release(): closing one
            # under a running statement in another thread can crash the interpreter.
            conns, self._all, self._pool = self._pool, [], []
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
            self._check(conn)
        finally:
            conn.close()

    def _check(self, conn: sqlite3.Connection) -> int:
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

    def _check_and_migrate(self, conn: sqlite3.Connection) -> None:
        version = self._check(conn)
        if version == len(MIGRATIONS):
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            for number in range(version, len(MIGRATIONS)):
                script = resources.files("sbroker.storage.sqlite").joinpath(
                    "migrations", MIGRATIONS[number])
                for statement in _split_sql(script.read_text("utf-8")):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {number + 1}")
            if version == 0:
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(
                    "INSERT INTO sb_meta(key, value) VALUES ('broker_instance', ?)",
                    (str(uuid.uuid4()).upper(),),
                )
                conn.execute("INSERT INTO sb_meta(key, value) VALUES ('catalog_version', '0')")
                conn.execute(
                    "INSERT INTO sb_meta(key, value) VALUES ('honor_broker_priority', '0')"
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    # -- sessions --------------------------------------------------------------------------
    def register_session(self, now: float) -> int:
        with self.connection() as conn:
            cur = conn.execute(
                "INSERT INTO sb_sessions(pid, start_token, host, opened_at) VALUES (?, ?, ?, ?)",
                (os.getpid(), process_start_token(os.getpid()), socket.gethostname(), now),
            )
            assert cur.lastrowid is not None
            return cur.lastrowid

    def reap_dead_sessions(self, conn: sqlite3.Connection, own_session: int) -> int:
        """Drop the locks and rows of sessions whose process has died; how many were dropped."""
        rows = conn.execute(
            "SELECT session_id, pid, start_token, host FROM sb_sessions WHERE session_id != ?",
            (own_session,),
        ).fetchall()
        dead = [sid for sid, pid, token, host in rows if not process_alive(pid, token, host)]
        if not dead:
            return 0
        marks = ",".join("?" * len(dead))
        with write(conn):
            for table in ("sb_group_locks", "sb_activated_tasks", "sb_queue_monitors",
                          "sb_sessions"):
                conn.execute(f"DELETE FROM {table} WHERE session_id IN ({marks})", dead)
        return len(dead)


@contextlib.contextmanager
def write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A short write transaction (BEGIN IMMEDIATE .. COMMIT), or a no-op inside an open one."""
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _split_sql(text: str) -> list[str]:
    """Statements of a migration script (each ends with ';' at the end of a line, and is
    complete by SQLite's rules: a trigger's body holds ';'s of its own)."""
    statements: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.strip().startswith("--") and not current:
            continue
        current.append(line)
        if line.rstrip().endswith(";") and sqlite3.complete_statement("\n".join(current)):
            statements.append("\n".join(current))
            current = []
    if "".join(current).strip():
        statements.append("\n".join(current))
    return statements


def rows_as_dicts(cur: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
