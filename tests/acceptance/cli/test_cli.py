"""The sbroker command line: commands, one-line errors, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from sbroker.cli.main import main


def run(db: Path | str, *args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner(mix_stderr=False).invoke(main, ["--db", str(db), *args], input=input)
    return result.exit_code, result.stdout, result.stderr


def test_init_send_receive_status(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    code, out, _ = run(db, "init", "--queue", "Q", "--service", "Svc:Q:DEFAULT")
    assert code == 0 and "broker_instance" in out
    code, out, _ = run(db, "send", "--from", "Svc", "--to", "Svc", "hello there")
    assert code == 0
    handle = out.strip()
    code, out, _ = run(db, "send", "--handle", handle, "-", input="from stdin")
    assert code == 0
    code, out, _ = run(db, "receive", "Q")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["body"] for r in rows] == ["hello there", "from stdin"]
    assert [r["message_sequence_number"] for r in rows] == [0, 1]
    code, out, _ = run(db, "status", "service_queues", "conversation_endpoints")
    assert code == 0 and "service_queues" in out and "Svc" in out


def test_send_dash_sends_standard_input_byte_for_byte(tmp_path: Path) -> None:
    from sbroker import Broker

    db = tmp_path / "cli.db"
    run(db, "init", "--queue", "Q", "--service", "Svc:Q:DEFAULT")
    data = b"line one\nnot utf-8: \xff\x00\n"
    result = CliRunner(mix_stderr=False).invoke(
        main, ["--db", str(db), "send", "--from", "Svc", "--to", "Svc", "-"], input=data)
    assert result.exit_code == 0, result.stderr
    with Broker.open(db) as b:
        assert [m.message_body for m in b.peek("Q")] == [data]


def test_views_lists_each_view_once_and_status_reads_every_one(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    run(db, "init", "--queue", "Q")
    code, out, _ = run(db, "views")
    names = out.split()
    assert code == 0 and len(names) == len(set(names)), names
    assert {"queue_stats", "dm_broker_connections", "dm_broker_partial_messages"} <= set(names)
    for name in names:  # ExecutionLog and ExecutionStatus exist once the executor is installed
        if name not in ("ExecutionLog", "ExecutionStatus"):
            code, out, err = run(db, "status", name)
            assert code == 0, (name, err)


def test_version(tmp_path: Path) -> None:
    from importlib.metadata import version

    code, out, _ = run(tmp_path / "none.db", "--version")
    assert code == 0 and out.strip() == f"sbroker, version {version('sbroker')}"
    assert not (tmp_path / "none.db").exists()

def test_errors_are_one_line_with_a_nonzero_exit(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    run(db, "init", "--queue", "Q")
    code, _, err = run(db, "receive", "NoSuchQueue")
    assert code == 1
    assert err.strip().count("\n") == 0 and "NoSuchQueue" in err and "15151" in err
    code, _, err = run(db, "send", "hello")
    assert code == 2 and "--handle" in err
    code, _, err = run(db, "send", "--handle", "not-a-uuid", "x")
    assert code == 1 and "not a valid UUID" in err
    code, _, err = run(db, "status", "no_such_view")
    assert code == 1 and "unknown view" in err
    code, _, err = run("mysql://me@127.0.0.1/shop", "status")
    assert code == 1 and err.strip().count("\n") == 0
    assert "'mysql'" in err and "sqlite:///path" in err and "postgresql://" in err
    code, _, err = run(db, "init", "--service", "broken")
    assert code == 2 and "NAME:QUEUE" in err


def test_a_file_that_is_not_a_broker_database_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("just some text, not a database\n" * 10)
    before = other.read_bytes()
    code, _, err = run(other, "status")
    assert code == 1 and "not" in err
    assert other.read_bytes() == before


def test_the_demo_runs_as_a_separate_process(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "sbroker.cli", "--db", str(tmp_path / "demo.db"), "demo"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Both sides ended" in proc.stdout


def test_poison_commands(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    run(db, "init", "--queue", "Q")
    assert run(db, "poison", "list") == (0, "", "")
    code, _, err = run(db, "poison", "redrive", "42")
    assert code == 1 and "42" in err and err.count("\n") == 1
    code, _, err = run(db, "poison", "redrive")
    assert code == 2 and "--due" in err
    code, out, _ = run(db, "poison", "redrive", "--due")
    assert code == 0 and "0 parked" in out


def test_activator_refuses_a_malformed_command(tmp_path: Path) -> None:
    code, _, err = run(tmp_path / "a.db", "activator", "--notification-queue", "N",
                       "--command", "no-equals-sign")
    assert code == 2 and "QUEUE=COMMAND" in err
