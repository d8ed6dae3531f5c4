"""``sbroker run FILE [--resume [RUN_ID]]`` and ``sbroker runs [show]`` as a user runs them:
exit codes, one-line errors naming the file and line (nothing run), and the JSON of runs.
The Python tasks never touch Spark, so no JVM starts."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from sbroker.cli.main import main

TASKS = '''
import pathlib


def count(spark, path, fail_first=False):
    p = pathlib.Path(path)
    n = int(p.read_text()) + 1 if p.exists() else 1
    p.write_text(str(n))
    if fail_first and n == 1:
        raise RuntimeError("first call fails")
    return n
'''


def write(folder: Path, name: str, body: str) -> Path:
    (folder / "count_tasks.py").write_text(TASKS)
    path = folder / f"{name}.toml"
    path.write_text(f'[pipeline]\nname = "{name}"\n' + textwrap.dedent(body))
    return path


def good(folder: Path, name: str = "good") -> Path:
    return write(folder, name, f'''
        [[task]]
        name = "a"
        python = "count_tasks:count"
        args = {{ path = "{folder}/a" }}
        [[task]]
        name = "b"
        python = "count_tasks:count"
        after = ["a"]
        args = {{ path = "{folder}/b", fail_first = true }}
    ''')


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner(mix_stderr=False).invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(("body", "line", "message"), [
    ('[[task]]\nname = "a"\nsql = "1"\nafter = ["nope"]\n', 6, "comes after 'nope'"),
    ('[[task]]\nname = "a"\nsql = "1"\nafter = ["b"]\n[[task]]\nname = "b"\nsql = "1"\n'
     'after = ["a"]\n', 6, "make a cycle: a -> b -> a"),
    ('[[task]]\nname = "a"\nsql = "1"\n[[task]]\nname = "a"\nsql = "2"\n', 7,
     "duplicate task name 'a'"),
    ('[[task]]\nname = "a"\nsql = "1"\nretry_delay = "10 parsecs"\n', 6, "10 parsecs"),
    ('[schedule]\ncron = "every day"\n[[task]]\nname = "a"\nsql = "1"\n', 4, "'cron' must"),
    ('[[task]]\nname = "a"\nsql = "1"\nretries = -1\n', 6, "'retries' must be an integer"),
])
def test_a_bad_file_is_one_line_with_file_and_line_exit_2_and_nothing_runs(
        tmp_path: Path, body: str, line: int, message: str) -> None:
    path = write(tmp_path, "bad", body)
    db = tmp_path / "run.db"
    code, out, err = cli("--db", str(db), "run", str(path))
    assert code == 2, (out, err)
    [error] = err.strip().splitlines()
    assert error.startswith(f"sbroker: error: {path}:{line}: ") and message in error, error
    assert not db.exists()  # nothing ran: the database was not even opened


def test_run_resume_and_runs_json(tmp_path: Path) -> None:
    path, db = good(tmp_path), str(tmp_path / "run.db")
    code, out, _ = cli("--db", db, "run", str(path))
    assert code == 1 and "run 1 of pipeline good started" in out
    assert "--resume 1" in out
    code, out, _ = cli("--db", db, "run", str(path), "--resume")
    assert code == 0, out
    assert "1 succeeded already and kept" in out
    assert (tmp_path / "a").read_text() == "1"  # a ran once, b twice
    assert (tmp_path / "b").read_text() == "2"
    code, out, _ = cli("--db", db, "run", str(path), "--resume", "1")
    assert code == 0 and "succeeded already: nothing to run" in out
    code, out, _ = cli("--db", db, "runs", "--json")
    [run] = json.loads(out)
    assert run["run_id"] == 1 and run["pipeline"] == "good" and run["status"] == "succeeded"
    code, out, _ = cli("--db", db, "runs", "show", "1", "--json")
    shown = json.loads(out)
    assert [(t["name"], t["status"], t["attempts"], t["value"]) for t in shown["tasks"]] == [
        ("a", "succeeded", 1, 1), ("b", "succeeded", 2, 2)]
    code, out, _ = cli("--db", db, "runs", "--pipeline", "other", "--json")
    assert code == 0 and json.loads(out) == []
    code, _, err = cli("--db", db, "runs", "show", "7")
    assert code == 1 and "there is no run 7" in err


def test_resume_errors_exit_2(tmp_path: Path) -> None:
    path, db = good(tmp_path), str(tmp_path / "run.db")
    code, _, err = cli("--db", db, "run", str(path), "--resume")
    assert code == 2 and "no run of pipeline 'good' to resume" in err
    code, _, err = cli("--db", db, "run", str(path), "--resume", "42")
    assert code == 2 and "there is no run 42 to resume" in err
    other = good(tmp_path, "other")
    assert cli("--db", db, "run", str(other))[0] == 1
    code, _, err = cli("--db", db, "run", str(path), "--resume", "1")
    assert code == 2 and "run 1 is a run of pipeline 'other', not of 'good'" in err
    code, _, err = cli("--db", db, "run", str(path), "--resume", "x1")
    assert code == 2 and "--resume takes a run id" in err


def test_schedule_add_list_remove(tmp_path: Path) -> None:
    path, db = good(tmp_path), str(tmp_path / "run.db")
    code, _, err = cli("--db", db, "schedule", "add", str(path))
    assert code == 2 and "no [schedule]: give --every or --cron" in err
    code, _, err = cli("--db", db, "schedule", "add", str(path), "--cron", "0 25 * * *")
    assert code == 2 and "--cron must be a cron expression" in err
    code, _, err = cli("--db", db, "schedule", "add", str(path), "--every", "10 parsecs")
    assert code == 2 and "--every must be a duration" in err
    code, out, _ = cli("--db", db, "schedule", "add", str(path), "-p", "x=1", "--cron",
                       "30 4 * * *")
    assert code == 2  # the file declares no parameter x
    code, out, _ = cli("--db", db, "schedule", "add", str(path), "--cron", "30 4 * * *")
    assert code == 0 and "schedule good added: next run due" in out
    code, out, _ = cli("--db", db, "schedule", "list", "--json")
    [row] = json.loads(out)
    assert (row["name"], row["cron"], row["every"]) == ("good", "30 4 * * *", None)
    assert row["next_due"].endswith("T04:30:00+00:00")
    assert cli("--db", db, "schedule", "remove", "good")[0] == 0
    code, _, err = cli("--db", db, "schedule", "remove", "good")
    assert code == 1 and "there is no schedule 'good'" in err
    assert json.loads(cli("--db", db, "schedule", "list", "--json")[1]) == []
