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
