"""The command line on a PostgreSQL database (docs/postgresql.md): ``--db postgresql://...`` and
``SBROKER_DB`` take the URL like a file path, as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from support.postgres import RunServer


@pytest.fixture
def url(postgres: RunServer) -> Iterator[str]:
    made = postgres.new_database()
    yield made
    postgres.drop(made)


def sbroker(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sbroker.cli", *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})


def test_a_command_on_a_database_without_a_broker_says_to_init_it(url: str) -> None:
    done = sbroker("--db", url, "status")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "init" in done.stderr


def test_init_send_receive_and_status_with_the_url_in_sbroker_db(url: str) -> None:
    env = {"SBROKER_DB": url}
    done = sbroker("init", "--queue", "Q", "--service", "Svc:Q:DEFAULT", env=env)
    assert done.returncode == 0, done.stderr
    assert sbroker("send", "--from", "Svc", "--to", "Svc", "hello", env=env).returncode == 0
    got = sbroker("receive", "Q", "--timeout", "5", env=env)
    assert got.returncode == 0, got.stderr
    assert [json.loads(line)["body"] for line in got.stdout.splitlines()] == ["hello"]
    status = sbroker("--db", url, "status")
    assert status.returncode == 0, status.stderr
    assert "Q" in status.stdout


def test_an_unreachable_server_is_one_line() -> None:
    done = sbroker("--db", "postgresql://sbroker@127.0.0.1:1/db", "status")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "cannot reach PostgreSQL" in done.stderr
