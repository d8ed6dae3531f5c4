"""`python -m bench.pgoverlap`: each way of sending W2's commits puts every message in and
numbers each dialog on (the bench checks that after sending), and each is measured."""

from __future__ import annotations

import pytest
from support.postgres import RunServer

from bench import pgoverlap


def test_every_way_sends_and_is_measured(postgres: RunServer) -> None:
    figures = pgoverlap.run(postgres.server, 200, 1, [25], client_us=1.0)
    ways = ["serial (today)", "pipelined by 25", "raw peer"]
    assert list(figures) == [n for w in ways for n in (w, f"{w}: server")]
    assert all(len(values) == 1 and values[0] > 0 for values in figures.values()), figures


def test_a_chunk_that_does_not_divide_a_commit_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        pgoverlap.main(["--chunks", "30"])
    assert "30 does not divide 100" in capsys.readouterr().err
