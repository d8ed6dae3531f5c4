"""What a user sees of Spark in ``sbroker run``: none of the JVM's own lines (start-up
warnings, log4j, the stack traces of a Ctrl-C), and one line saying where Spark's full log
is. A real child process with its own JVM, as a user runs it."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JVM_LINES = ("WARNING: Using incubator", "log level", " WARN ", " INFO ", "\tat ",
             "Exception", "ERROR")


def test_run_keeps_the_jvm_off_the_terminal_and_says_where_the_log_is(
        tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text(textwrap.dedent('''
        [pipeline]
        name = "quiet"
        [[stage]]
        name = "quick"
        [[stage.task]]
        sql = "SELECT 1"
        [[stage]]
        name = "long"
        [[stage.task]]
        sql = "SELECT count(*) FROM range(0, 50000000000, 1, 2)"
    '''))
    seen: list[str] = []
    lines: queue.Queue[str] = queue.Queue()
    with subprocess.Popen(
            [sys.executable, "-m", "sbroker.cli", "--db", "run.db", "run", "p.toml"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1")) as proc:
        reader = threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout or ()],
                                  daemon=True)
        reader.start()
        try:
            while not any(x.lstrip().startswith("long/") and " started" in x for x in seen):
                seen.append(lines.get(timeout=300))  # the JVM starts, stage quick runs
            proc.send_signal(signal.SIGINT)  # Ctrl-C while Spark runs the long query
            err = proc.stderr.read() if proc.stderr else ""
            proc.wait(timeout=120)
            reader.join(30)
        finally:
            if proc.poll() is None:
                proc.kill()
    while not lines.empty():
        seen.append(lines.get())
    out = "".join(seen)
    assert proc.returncode == 130, (out, err)
    for noise in JVM_LINES:
        assert noise not in out and noise not in err, (noise, out, err)
    [log_line] = [x for x in seen if x.startswith("Spark's log: ")]
    log = tmp_path / log_line.removeprefix("Spark's log: ").strip()
    assert log.parent == tmp_path / "out" / "spark-logs"
    assert "INFO SparkContext: Running Spark version" in log.read_text()
