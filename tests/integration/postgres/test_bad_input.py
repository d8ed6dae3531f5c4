"""Bad input on PostgreSQL (docs/postgresql.md, "Errors"): each a one-line BrokerError that says
what to do."""

from __future__ import annotations

import psycopg
import pytest
from support.postgres import RunServer

import sbroker
from sbroker import Broker, DatabaseError
from sbroker.storage.postgres import connector


def _one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_an_unreachable_server_says_so() -> None:
    with pytest.raises(DatabaseError) as e:
        Broker.open("postgresql://sbroker@127.0.0.1:1/nothing")
    assert "cannot reach PostgreSQL at 127.0.0.1:1 (connection refused)" in _one_line(e)


def test_wrong_credentials_say_which_user(postgres: RunServer) -> None:
    server = postgres.server
    server.sql("CREATE ROLE sb_pw LOGIN PASSWORD 'right'")
    try:
        url = server.url(user="sb_pw").replace("sb_pw@", "sb_pw:wrong@")
        hba = server.dir / "data" / "pg_hba.conf"
        original = hba.read_text()
        hba.write_text("host all sb_pw 127.0.0.1/32 scram-sha-256\n" + original)
        server.sql("SELECT pg_reload_conf()")
        try:
            with pytest.raises(DatabaseError) as e:
                Broker.open(url)
            assert "refused user sb_pw: wrong or missing password" in _one_line(e)
            assert "wrong@" not in str(e.value)
        finally:
            hba.write_text(original)
            server.sql("SELECT pg_reload_conf()")
    finally:
        server.sql("DROP ROLE sb_pw")


def test_a_missing_database_says_how_to_create_it(postgres: RunServer) -> None:
    with pytest.raises(DatabaseError) as e:
        Broker.open(postgres.server.url("no_such_db"))
    assert "has no database 'no_such_db'" in _one_line(e)


def test_a_user_without_create_on_the_schema_is_told_what_to_grant(
        postgres: RunServer, pg_url: str) -> None:
    postgres.server.sql("CREATE ROLE sb_reader LOGIN")
    try:
        url = pg_url.replace("postgres@", "sb_reader@")
        with pytest.raises(DatabaseError) as e:
            Broker.open(url)
        text = _one_line(e)
        assert "user sb_reader may not create the broker's tables in schema public" in text
        assert "GRANT CREATE ON SCHEMA public TO sb_reader" in text
    finally:
        postgres.server.sql("DROP ROLE sb_reader")


def test_a_server_older_than_14_is_refused(pg_url: str, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    # The test server is 15: pretend sbroker needed a newer one to see the refusal.
    monkeypatch.setattr(connector, "MIN_SERVER", 990000)
    with pytest.raises(DatabaseError) as e:
        Broker.open(pg_url)
    assert "too old: sbroker needs PostgreSQL 14 or newer" in _one_line(e)


def test_a_database_at_a_newer_schema_version_is_refused(pg_url: str) -> None:
    Broker.open(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO sb_migrations(version) VALUES (99)")
    with pytest.raises(DatabaseError) as e:
        Broker.open(pg_url)
    assert "schema version 99, newer than this sbroker" in _one_line(e)
    assert "upgrade sbroker" in str(e.value)


def test_create_false_refuses_a_database_without_a_broker(pg_url: str) -> None:
    with pytest.raises(DatabaseError, match="create=False"):
        Broker.open(pg_url, create=False)
    Broker.open(pg_url).close()
    Broker.open(pg_url, create=False).close()


def test_bad_options_in_the_url_and_durability_are_clear(pg_url: str) -> None:
    with pytest.raises(sbroker.InvalidArgumentError, match="pool_max"):
        Broker.open(pg_url + "?pool_max=x")
    with pytest.raises(sbroker.InvalidArgumentError, match="durability"):
        Broker.open(pg_url, durability="sometimes")


def test_pool_max_in_the_url_is_sbrokers_and_not_given_to_libpq(pg_url: str) -> None:
    with Broker.open(pg_url + "?pool_max=3&connect_timeout=5") as b:
        assert b.db.connector.pool_max == 3
        assert b.db.connector.params["connect_timeout"] == "5"
