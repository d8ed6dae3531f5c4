"""``sbroker run FILE`` as a user runs it (a broker database, the executor activated, the real
SparkRunner; the Python tasks here never touch Spark, so no JVM starts), and ``--local``: the
same runner on a throwaway database."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from sbroker.cli.main import main

FAILING = '''
def kaboom(spark, what="kaboom"):
    _check(what)


def _check(what):
    raise ValueError(what)
'''


def pipeline(folder: Path) -> Path:
    (folder / "failing_tasks.py").write_text(textwrap.dedent(FAILING))
    path = folder / "failing.toml"
    path.write_text(textwrap.dedent('''
        [pipeline]
        name = "failing"

        [[stage]]
        name = "only"

        [[stage.task]]
        name = "boom"
        python = "failing_tasks:kaboom"
    '''))
    return path


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner(mix_stderr=False).invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_a_failed_task_shows_one_line_and_its_traceback_with_verbose(tmp_path: Path) -> None:
    file = pipeline(tmp_path)
    db = str(tmp_path / "run.db")
    code, out, _ = run("--db", db, "run", str(file))
    assert code == 1
    assert "ValueError: kaboom" in out and "Traceback" not in out
    assert "-v" in out  # says how to see more
    code, out, _ = run("--db", db, "run", "-v", str(file))
    assert code == 1
    assert "Traceback (most recent call last)" in out and "in _check" in out


def test_local_runs_the_durable_runner_on_a_throwaway_database(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "local_tasks.py").write_text("def hello(spark, who):\n    return f'hi {who}'\n")
    path = tmp_path / "local.toml"
    path.write_text(textwrap.dedent('''
        [pipeline]
        name = "local"
        [[task]]
        name = "a"
        python = "local_tasks:hello"
        args = { who = "a" }
        [[task]]
        name = "b"
        python = "local_tasks:hello"
        after = ["a"]
        args = { who = "b" }
        [[task]]
        name = "c"
        python = "failing_tasks:kaboom"
        after = ["b"]
    '''))
    pipeline(tmp_path)  # failing_tasks.py beside it
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.chdir(tmp_path)
    code, out, _ = run("run", "--local", str(path))
    assert code == 1, out
    assert "run 1 of pipeline local started: 3 tasks" in out  # the durable runner's lines
    assert '"hi b"' in out and "ValueError: kaboom" in out
    assert "--resume" not in out  # nothing to resume: the database is gone
    assert list(temp.iterdir()) == [] and not (tmp_path / "sbroker.db").exists()
