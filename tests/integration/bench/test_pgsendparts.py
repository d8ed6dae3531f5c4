"""`python -m bench.pgsendparts`: its variants of W2's SEND each put every message in and
number each dialog on (the bench checks that after sending), and each is measured."""

from __future__ import annotations

from support.postgres import RunServer

from bench import pgsendparts


def test_every_variant_sends_and_is_measured(postgres: RunServer) -> None:
    names = ["call only", "all three"]  # all three makes every edit of the others
    figures = pgsendparts.run(postgres.server, 200, 1, names)
    assert list(figures) == names
    assert all(len(values) == 1 and values[0] > 0 for values in figures.values()), figures


def test_idle_endpoints_are_added_and_the_variants_send_among_them(postgres: RunServer) -> None:
    figures = pgsendparts.run(postgres.server, 100, 1, ["today", "nested loops"], endpoints=1000)
    assert all(len(values) == 1 and values[0] > 0 for values in figures.values()), figures


def test_add_endpoints_fills_the_database_to_the_count_asked(postgres: RunServer) -> None:
    import uuid

    import psycopg

    from bench import leanpg

    url = postgres.server.create_database(f"sendparts_endpoints_{uuid.uuid4().hex[:8]}")
    leanpg.broker(url)
    pgsendparts.add_endpoints(url, 1000)
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*), count(DISTINCT handle), count(DISTINCT"
                           " (conversation_id, is_initiator)) FROM sb_endpoints").fetchone()
    assert row == (1000, 1000, 1000)
