"""The PostgreSQL connector: the URL, the checks a server must pass (reachable, the right
credentials, version 14 or newer, the broker's schema at a version this sbroker knows, the
right to create it), the numbered migrations, and the pool of connections (psycopg_pool).

Every connection runs in autocommit mode (transactions are opened with ``BEGIN``), carries
TCP keepalives both ways (a host that vanished loses its locks within seconds, and we notice
a server that did), and sets ``synchronous_commit`` by the ``durability`` option: "full" waits
for the WAL flush of each commit, "normal" does not (a server crash may lose the last
fraction of a second of commits; a killed client loses nothing).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg.adapt import Dumper
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from sbroker.core.errors import DatabaseError, InvalidArgumentError
from sbroker.storage.migrate import migrations
from sbroker.storage.postgres.connection import BACKEND, SQL, PgConnection

MIGRATIONS = migrations("sbroker.storage.postgres")
MIN_SERVER = 140000
SYNC = {"full": "on", "normal": "off"}
POOL_MAX = 32
POOL_TIMEOUT = 30.0
KEEPALIVES = {"keepalives": "1", "keepalives_idle": "5", "keepalives_interval": "2",
              "keepalives_count": "3"}
SERVER_KEEPALIVES = ("-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2"
                     " -c tcp_keepalives_count=3 -c tcp_user_timeout=10000")
OWN_PARAMS = ("pool_max",)  # taken from the URL's query by sbroker, not given to libpq


class BoolDumper(Dumper):
    """Python bools travel as untyped '1'/'0': the server reads them as the integer columns
    (SQLite's booleans) or the boolean columns they go into, as SQLite takes them."""

    oid = 0

    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


def configure(conn: psycopg.Connection[Any]) -> None:
    conn.adapters.register_dumper(bool, BoolDumper)


def parse(url: str, durability: str) -> tuple[dict[str, Any], int]:
    """libpq connection parameters for ``url`` (with sbroker's additions) and the pool size."""
    if durability not in SYNC:
        raise InvalidArgumentError(
            f"unknown durability {durability!r}: use 'full' (wait for the WAL flush of each"
            " commit) or 'normal'")
    url, own = _own_params(url)
    try:
        params: dict[str, Any] = conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise InvalidArgumentError(f"bad PostgreSQL URL {redact(url)}: {exc}") from None
    pool_max = POOL_MAX
    if "pool_max" in own:
        raw = own["pool_max"]
        if not raw.isdigit() or int(raw) < 2:
            raise InvalidArgumentError(f"pool_max={raw!r} in the URL must be an integer >= 2")
        pool_max = int(raw)
    for key, value in KEEPALIVES.items():
        params.setdefault(key, value)
    params.setdefault("connect_timeout", "10")
    extra = f"{SERVER_KEEPALIVES} -c synchronous_commit={SYNC[durability]}"
    params["options"] = f"{params['options']} {extra}" if params.get("options") else extra
    return params, pool_max


def _own_params(url: str) -> tuple[str, dict[str, str]]:
    """The URL without sbroker's own query parameters (libpq refuses unknown ones), and
    those."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    own = {k: v for k, v in query if k in OWN_PARAMS}
    rest = urlencode([(k, v) for k, v in query if k not in OWN_PARAMS])
    return urlunsplit(parts._replace(query=rest)), own


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    head, sep, tail = url.partition("@")
    if not sep or "://" not in head:
        return url
    scheme, _, userinfo = head.partition("://")
    return f"{scheme}://{userinfo.split(':', 1)[0]}@{tail}"


def describe(params: dict[str, Any]) -> str:
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    return f"PostgreSQL at {host}:{port}"


def connect_error(exc: psycopg.Error, params: dict[str, Any]) -> DatabaseError:
    """What a failed connection attempt means, in one line with what to do."""
    where = describe(params)
    text = " ".join(str(exc).split())
    user = params.get("user") or "(default user)"
    db = params.get("dbname") or user
    if "password authentication failed" in text or "no password supplied" in text:
        why = f"{where} refused user {user}: wrong or missing password; check the URL"
    elif "does not exist" in text and "database" in text:
        why = (f"{where} has no database {db!r}: create it (createdb {db}) or fix the URL")
    elif "role" in text and "does not exist" in text:
        why = f"{where} has no user {user!r}: create it (createuser) or fix the URL"
    elif "Connection refused" in text or "could not connect" in text or "timeout" in text \
            or "translate host name" in text:
        reason = ("connection refused" if "Connection refused" in text else
                  "unknown host" if "translate host name" in text else
                  "no answer" if "timeout" in text else "no connection")
        why = (f"cannot reach {where} ({reason}): is the server running, and are the host"
               " and port in the URL right?")
    else:
        why = f"cannot connect to {where}: {text}"
    return DatabaseError(why)


class Connector:
    """The server of one broker database: its checks, migrations and connection pool."""

    def __init__(self, url: str, *, durability: str = "normal", create: bool = True) -> None:
        self.url = url
        self.params, self.pool_max = parse(url, durability)
        self.where = describe(self.params)
        self.application_name = "sbroker"
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._lock = threading.Lock()
        self._closed = False
        with self.connect_raw() as conn:
            where = conn.execute(BACKEND.where_am_i).fetchone() or ("", "", "")
            self.database: str = str(where[0])
            self.schema: str = str(where[1])
            self.user: str = str(where[2])
            self._migrate(conn, create=create)

    # -- connections ------------------------------------------------------------------------
    def connect_raw(self, **extra: Any) -> psycopg.Connection[Any]:
        """A new connection outside the pool (migrations, the session's own connection)."""
        try:
            conn = psycopg.connect(**self.params, autocommit=True,
                                   application_name=self.application_name, **extra)
        except psycopg.OperationalError as exc:
            raise connect_error(exc, self.params) from None
        configure(conn)
        version = conn.info.server_version
        if version < MIN_SERVER:
            conn.close()
            raise DatabaseError(
                f"{self.where} runs PostgreSQL {version // 10000}.{version % 10000}, too old:"
                " sbroker needs PostgreSQL 14 or newer")
        return conn

    def pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        with self._lock:
            if self._closed:
                raise DatabaseError("the broker is closed")
            if self._pool is None:
                # prepare_threshold=None: psycopg prepares nothing by itself, so it never
                # sends the DEALLOCATE ALL (after a ROLLBACK) that would also drop the
                # statements connection.py prepares.
                self._pool = ConnectionPool(
                    kwargs={**self.params, "autocommit": True, "prepare_threshold": None,
                            "application_name": self.application_name},
                    min_size=1, max_size=self.pool_max, timeout=POOL_TIMEOUT,
                    name="sbroker", open=True, configure=configure,
                    reconnect_failed=self._reconnect_failed)
            return self._pool

    @staticmethod
    def _reconnect_failed(pool: ConnectionPool[Any]) -> None:
        """The pool gave up reconnecting for a while: it keeps trying on demand."""

    def checkout(self) -> PgConnection:
        """A pooled connection for the caller's exclusive use until :meth:`release`."""
        pool = self.pool()
        try:
            raw = pool.getconn()
        except PoolTimeout:
            raise DatabaseError(
                f"all {self.pool_max} connections to {self.where} are in use (open"
                " transactions hold one each): end transactions sooner, or raise"
                " ?pool_max=N in the URL") from None
        except psycopg.OperationalError as exc:
            raise connect_error(exc, self.params) from None
        return PgConnection(raw, self._replace)

    def _replace(self, broken: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
        """A broken connection goes back (the pool drops it, and checks the others: after a
        server restart they are all broken) and a fresh one comes."""
        pool = self.pool()
        pool.putconn(broken)
        with contextlib.suppress(Exception):
            pool.check()
        try:
            return pool.getconn()
        except (PoolTimeout, psycopg.OperationalError) as exc:
            raise DatabaseError(f"cannot reconnect to {self.where}: {exc}") from None

    def release(self, conn: PgConnection) -> None:
        if conn.usable and conn.in_transaction:
            with contextlib.suppress(psycopg.Error):
                conn.rollback()
        with self._lock:
            pool = self._pool
        if pool is None or self._closed:
            with contextlib.suppress(psycopg.Error):
                conn.raw.close()
            return
        pool.putconn(conn.raw)

    @contextlib.contextmanager
    def read(self) -> Any:
        conn = self.checkout()
        try:
            yield conn
        finally:
            self.release(conn)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close(timeout=5)

    # -- schema -------------------------------------------------------------------------------
    def _version(self, conn: psycopg.Connection[Any]) -> int:
        row = conn.execute(BACKEND.has_schema).fetchone()
        if not row or not row[0]:
            return 0
        row = conn.execute(BACKEND.schema_version).fetchone()
        version = int(row[0]) if row else 0
        if version > len(MIGRATIONS):
            raise DatabaseError(
                f"the broker database {self.database} on {self.where} has schema version"
                f" {version}, newer than this sbroker ({len(MIGRATIONS)}): upgrade sbroker")
        return version

    def _migrate(self, conn: psycopg.Connection[Any], *, create: bool) -> None:
        """Apply the migrations the database lacks, in one transaction."""
        if self._version(conn) == len(MIGRATIONS):
            return
        if not create and self._version(conn) == 0:
            raise DatabaseError(
                f"no broker database in {self.database} on {self.where} (create=False):"
                " create it with Broker.open(url) or `sbroker --db URL init`")
        try:
            conn.execute("BEGIN")
            conn.execute(BACKEND.lock_migrations)
            version = self._version(conn)
            for migration in MIGRATIONS[version:]:
                conn.execute(migration.text)
                conn.execute(BACKEND.record_migration, (migration.number,))
            if version == 0:
                conn.execute(SQL.new_database, (str(uuid.uuid4()).upper(),))
            conn.execute("COMMIT")
        except pg_errors.InsufficientPrivilege as exc:
            conn.execute("ROLLBACK")
            raise DatabaseError(
                f"user {self.user} may not create the broker's tables in schema"
                f" {self.schema} of database {self.database} on {self.where}"
                f" ({str(exc).splitlines()[0]}): GRANT CREATE ON SCHEMA {self.schema} TO"
                f" {self.user}, or have the owner open the database once") from None
        except BaseException:
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("ROLLBACK")
            raise

