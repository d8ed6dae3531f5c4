"""``sbroker dashboard`` in a process of its own beside a worker, and ``sbroker serve
--dashboard`` (the broker's services and the dashboard in one process)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx2

import sbroker

from .helpers import send


def start(db: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "sbroker.cli", "--db", str(db), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:  # the process prints its address once it listens
        found = re.search(r"dashboard (?:of \S+ )?on (http://\S+?)[;\s]", line)
        if found:
            return proc, found.group(1)
    _, err = proc.communicate(timeout=30)
    raise AssertionError(f"no address printed; stderr: {err}")


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


def test_the_dashboard_command_serves_a_database_another_process_writes(
        pair: sbroker.Broker, db_path: Path) -> None:
    proc, url = start(db_path, "dashboard", "--port", "0")
    try:
        before = httpx2.get(f"{url}/api/views/queue_stats", timeout=30).json()
        send(pair, 3)  # this process is the worker
        after = httpx2.get(f"{url}/api/views/queue_stats", timeout=30).json()
        page = httpx2.get(f"{url}/queues/TargetQueue", timeout=30)
    finally:
        stop(proc)
    ready = {q["queue_name"]: q["ready_messages"] for q in before}
    assert ready["TargetQueue"] == 0
    assert {q["queue_name"]: q["ready_messages"] for q in after}["TargetQueue"] == 3
    assert page.status_code == 200 and page.text.count('<td class="body">hello</td>') == 3


def test_serve_with_the_dashboard_runs_both_in_one_process(db_path: Path) -> None:
    with sbroker.Broker.open(db_path) as b:
        b.create_queue("Q")
    proc, url = start(db_path, "serve", "--dashboard", "--dashboard-port", "0")
    try:
        r = httpx2.get(f"{url}/metrics", timeout=30)
        tasks = httpx2.get(f"{url}/api/views/dm_broker_queue_monitors", timeout=30)
    finally:
        stop(proc)
    assert r.status_code == 200 and 'sbroker_queue_enabled{queue="Q"} 1.0' in r.text
    assert tasks.status_code == 200


def test_the_dashboard_of_a_missing_database_is_refused_and_no_file_is_made(
        tmp_path: Path) -> None:
    db = tmp_path / "typo.db"
    proc = subprocess.run([sys.executable, "-m", "sbroker.cli", "--db", str(db), "dashboard",
                           "--port", "0"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stdout
    assert proc.stderr.strip() == (
        f"sbroker: error 5120: no broker database at {db}: create it with `sbroker --db {db}"
        " init`, or give --db (or SBROKER_DB) the path of an existing one")
    assert list(tmp_path.iterdir()) == []


def test_a_trace_url_that_is_no_http_template_is_refused_in_one_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from sbroker.cli import main

    for bad in ("ftp://traces/{trace_id}", "https://traces/without-the-id"):
        result = CliRunner().invoke(main, ["--db", str(tmp_path / "x.db"), "dashboard",
                                           "--port", "0", "--trace-url", bad])
        assert result.exit_code == 1
        assert result.output.strip().endswith(
            f"--trace-url must be an http(s) URL with {{trace_id}} in it, got {bad!r}")
    assert list(tmp_path.iterdir()) == []
