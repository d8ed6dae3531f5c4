"""`python -m bench.pgstatements` runs end to end on a throwaway server and prints, for each
phase, the statements' server time beside the raw peer's transaction, and the CPU time of
client and server per transaction."""

from __future__ import annotations

import os
import re
import time

import psycopg
import pytest
from support.postgres import RunServer

from bench import pgstatements


def test_it_prints_each_phase_with_sbroker_s_statements_and_the_peer(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert pgstatements.main(["-n", "300", "-k", "100", "--runs", "1", "--top", "40"]) == 0
    out = capsys.readouterr().out
    for phase in ("send", "receive"):
        assert f"run 1/1 raw postgres {phase:>7}:" in out
        assert f"{phase}, up to 100 per transaction (300 msgs, median of 1): sbroker" in out
    assert "sb_insert_messages_json" in out and "sb_receive_take_next" in out
    for phase in ("send", "receive"):
        found = re.search(rf"^{phase}: CPU µs per transaction \(median of 1\): client sbroker"
                          r" ([\d,]+), raw postgres ([\d,]+); server sbroker ([\d,]+), raw"
                          r" postgres ([\d,]+)$", out, re.MULTILINE)
        assert found, out
        # A few transactions are under the server's 10 ms clock tick: only the client's
        # CPU (nanoseconds) is sure to show; the server's count is tested below.
        assert int(found.group(1).replace(",", "")) > 0, found.group(0)
        assert int(found.group(2).replace(",", "")) > 0, found.group(0)


def test_the_server_s_cpu_time_counts_its_backends_live_and_exited(
        postgres: RunServer) -> None:
    server = postgres.server
    before = server.cpu_seconds()
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        pid = conn.info.backend_pid
        conn.execute("SELECT count(*) FROM generate_series(1, 3000000)")
        live = server.cpu_seconds()
    assert live - before >= 0.05  # a few hundred ms of a backend that still runs
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{pid}"):  # the postmaster reaps the closed backend
        assert time.monotonic() < deadline, f"backend {pid} still there after 30 s"
        time.sleep(0.01)
    assert server.cpu_seconds() >= live  # its time moved to the postmaster's children
