"""docs/performance.md is generated from the stored results, never typed by hand."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from bench.docs import DOC, render
from bench.report import RESULTS_DIR

ROOT = Path(__file__).resolve().parents[3]


def test_the_page_is_what_the_stored_results_generate() -> None:
    # a changed results file or a hand edit both show here: regenerate with
    # `python -m bench --write-docs`
    assert DOC.read_text() == render(RESULTS_DIR)


def test_write_docs_uses_the_stored_results_and_measures_nothing(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(RESULTS_DIR / "latest.json", results / "latest.json")
    data = json.loads((results / "latest.json").read_text())
    for r in data["results"]:  # figures no run ever produced: they can only come from here
        if (r["workload"], r["metric"], r["system"]) == ("W1", "receive", "sbroker"):
            r["values"] = [123456.0, 123457.0, 123458.0]
    (results / "latest.json").write_text(json.dumps(data))
    page = render(results)
    assert "| W1 receive (msgs/s) | 123,457 |" in page
    assert "Not stored yet: run `python -m bench.where`" in page  # no file of it here
    done = subprocess.run([sys.executable, "-m", "bench", "--write-docs"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "wrote" in done.stdout, done.stderr
