"""`python -m bench.pgstatements` runs end to end on a throwaway server and prints, for each
phase, the statements' server time beside the raw peer's transaction."""

from __future__ import annotations

import pytest

from bench import pgstatements


def test_it_prints_each_phase_with_sbroker_s_statements_and_the_peer(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert pgstatements.main(["-n", "300", "-k", "100", "--runs", "1", "--top", "5"]) == 0
    out = capsys.readouterr().out
    for phase in ("send", "receive"):
        assert f"run 1/1 raw postgres {phase:>7}:" in out
        assert f"{phase}, up to 100 per transaction (300 msgs, median of 1): sbroker" in out
    assert "sb_insert_messages_json" in out and "sb_receive_take_next" in out
