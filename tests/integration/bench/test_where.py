"""`python -m bench.where` runs W1 and W2 on each backend and stores, per phase, the time per
message split into the database's share and the rest, with the dearest statements by name;
and W3's CPU ceiling on SQLite.
The suite's SQLite peers (huey, litequeue) come with the `bench` extra, which the test
environment does not install: raw SQLite stands in as the peer here."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from support.postgres import RunServer

from bench import report, where


def _stored(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str) -> dict[str, Any]:
    monkeypatch.setattr(report, "RESULTS_DIR", tmp_path)
    assert where.main(["--quick", "--runs", "1", *args]) == 0
    data: dict[str, Any] = json.loads((tmp_path / "where-latest.json").read_text())
    return data


def _by_phase(data: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r["backend"], r["workload"], r["phase"]): r for r in data["rows"]}


def test_sqlite_phases_split_into_statements_and_the_rest(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(where.PEERS, ("sqlite", "W1"), "sqlite (raw)")
    monkeypatch.setitem(where.PEERS, ("sqlite", "W2"), "sqlite (raw)")
    rows = _by_phase(_stored(monkeypatch, tmp_path, "--backend", "sqlite"))
    w3 = rows.pop(("sqlite", "W3", "send + receive"))
    assert set(rows) == {("sqlite", w, p) for w in ("W1", "W2") for p in ("send", "receive")}
    for row in rows.values():
        assert 0 < row["database_us"][0] < row["wall_us"][0], row
        assert row["peer"] == "sqlite (raw)" and row["peer_us"][0] > 0, row
    names = {key: [s[0] for s in row["statements"]] for key, row in rows.items()}
    assert "send_direct" in names["sqlite", "W1", "send"]
    assert "executemany send_direct" in names["sqlite", "W2", "send"]
    assert "receive_take_next" in names["sqlite", "W1", "receive"]
    assert "COMMIT" in names["sqlite", "W1", "receive"]
    # W3: the ceiling its CPU per message sets, and what a counted run saw per message
    assert w3["ceiling"] == pytest.approx(1e6 / w3["cpu_us"][0])
    assert w3["sqlite_calls"] >= 2 and w3["handoffs"] > 0 and w3["database_us"] == []


def test_a_missing_peer_leaves_sbroker_s_figures_alone(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(where.PEERS, ("sqlite", "W1"), "huey")
    monkeypatch.setattr(where.SYSTEMS[[s.name for s in where.SYSTEMS].index("huey")],
                        "module", "sbroker_tests_no_such_module")
    rows = _by_phase(_stored(monkeypatch, tmp_path, "--backend", "sqlite"))
    assert "sbroker_tests_no_such_module not importable" in capsys.readouterr().err
    send = rows["sqlite", "W1", "send"]
    assert send["peer"] is None and send["peer_us"] == [] and send["wall_us"][0] > 0


def test_postgres_phases_give_the_server_s_cpu_and_its_statements(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    rows = _by_phase(_stored(monkeypatch, tmp_path, "--backend", "postgres"))
    assert {key[0] for key in rows} == {"postgres"} and len(rows) == 4
    for row in rows.values():
        assert row["peer"] == "postgres" and row["peer_us"][0] > 0, row
        assert row["cpu_us"][0] > 0, row
    statements = " ".join(s[0] for s in rows["postgres", "W1", "send"]["statements"])
    assert "sb_send_direct" in statements, statements
    statements = " ".join(s[0] for s in rows["postgres", "W2", "receive"]["statements"])
    assert "sb_receive_take_next" in statements, statements


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
