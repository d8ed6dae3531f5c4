"""``sbroker run FILE`` as a user runs it (a broker database, the executor activated, the real
SparkRunner; the Python tasks here never touch Spark, so no JVM starts)."""

from __future__ import annotations

import textwrap
from pathlib import Path

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
