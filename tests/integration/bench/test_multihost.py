"""`python -m bench.multihost` (W5) runs end to end: sbroker and the raw SKIP LOCKED peer, one
process x one thread and then several of each, every message received exactly once (the
benchmark checks it and fails otherwise)."""

from __future__ import annotations

import re

import pytest

from bench import multihost


def test_w5_runs_sbroker_and_the_raw_peer_in_one_run(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    multihost.main(["--runs", "1", "--messages", "300", "--baseline-messages", "60",
                    "--processes", "2", "--threads", "2"])
    out = capsys.readouterr().out
    for system in ("sbroker", "raw postgres"):
        line = re.search(rf"^run 1 +{system}: W1 receive \(1 x 1\) ([\d,]+) msgs/s, [\d.]+ CPUs"
                         rf" busy, ([\d.]+) context switches per message; W5 \(2 x 2\)"
                         rf" ([\d,]+) msgs/s, [\d.]+ CPUs busy, ([\d.]+) context switches",
                         out, re.MULTILINE)
        assert line, out
        one, one_switches, many, many_switches = line.groups()
        assert int(one.replace(",", "")) > 0 and int(many.replace(",", "")) > 0, line.group(0)
        # every RECEIVE waits for the server's answer at least once
        assert float(one_switches) >= 1 and float(many_switches) >= 1, line.group(0)
        assert re.search(rf"^{system}, median of 1: W1 receive", out, re.MULTILINE), out
    assert "target W5 >= 2x W1" in out  # said of sbroker's figures only
    assert out.count("target W5") == 1


def test_no_peer_leaves_the_raw_peer_out(capsys: pytest.CaptureFixture[str]) -> None:
    multihost.main(["--runs", "1", "--messages", "100", "--baseline-messages", "30",
                    "--processes", "1", "--threads", "2", "--no-peer"])
    out = capsys.readouterr().out
    assert "run 1      sbroker:" in out
    assert "raw postgres" not in out
