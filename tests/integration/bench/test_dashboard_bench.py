"""`python -m bench.dashboard` fills a database and times every page (tiny sizes here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import dashboard


def test_the_page_time_bench_runs_and_every_page_answers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = dashboard.main(["--conversations", "20", "--per", "3", "--runs", "1",
                           "--db", str(tmp_path / "d.db")])
    out = capsys.readouterr().out
    assert code == 0
    assert "Orders: 60 ready messages" in out
    for page in dashboard.PAGES:
        assert page in out
