"""Only ``init`` (and the library's ``Broker.open``) creates a database; other commands on a
missing file or a folder fail with one line and leave nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import sbroker
from sbroker.cli.main import main


def run(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    runner = CliRunner(mix_stderr=False)
    if cwd is None:
        result = runner.invoke(main, list(args))
    else:
        with runner.isolated_filesystem(temp_dir=cwd):
            result = runner.invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("command", [
    ["status"], ["receive", "Q"], ["send", "--from", "A", "--to", "B", "x"],
    ["poison", "list"], ["serve"],
])
def test_a_command_on_a_missing_database_fails_in_one_line_and_creates_nothing(
        tmp_path: Path, command: list[str]) -> None:
    typo = tmp_path / "typo.db"
    code, out, err = run("--db", str(typo), *command)
    assert code == 1, out
    assert err.count("\n") == 1 and "typo.db" in err and "init" in err
    assert list(tmp_path.iterdir()) == []


def test_the_default_database_is_named_when_it_is_missing(tmp_path: Path) -> None:
    code, _, err = run("status", cwd=tmp_path)
    assert code == 1
    assert "sbroker.db" in err and "the default --db" in err and err.count("\n") == 1


def test_init_creates_the_database_and_then_status_reads_it(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    assert run("--db", str(db), "init")[0] == 0
    assert db.exists()
    assert run("--db", str(db), "status")[0] == 0


def test_a_folder_given_as_the_database_says_it_is_a_folder(tmp_path: Path) -> None:
    code, _, err = run("--db", str(tmp_path), "status")
    assert code == 1 and "is a folder" in err and err.count("\n") == 1
    code, _, err = run("--db", str(tmp_path), "init")
    assert code == 1 and "is a folder" in err
    with pytest.raises(sbroker.DatabaseError, match="is a folder"):
        sbroker.Broker.open(tmp_path)


def test_broker_open_creates_by_default_and_refuses_a_missing_file_with_create_false(
        tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(sbroker.DatabaseError, match="missing.db"):
        sbroker.Broker.open(missing, create=False)
    assert not missing.exists()
    sbroker.Broker.open(missing).close()  # the library default creates
    sbroker.Broker.open(missing, create=False).close()  # and now it exists
