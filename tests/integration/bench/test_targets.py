"""The suite's verdicts on its targets, and the ratios of its table, from figures made up for
each case."""

from __future__ import annotations

from rich.console import Console

from bench.report import ratio, table
from bench.runner import Result
from bench.targets import own_ratios, verdicts


def _result(workload: str, metric: str, system: str, kind: str, median: float) -> Result:
    higher = metric not in ("p50", "p99")
    unit = "ms" if not higher else "msgs/s"
    return Result(workload, metric, unit, higher, system, kind, [median * 0.9, median, median * 2])


def _run(**figures: float) -> list[Result]:
    """Results from keys like ``W1_receive_sbroker``; the kind follows from the system."""
    kinds = {"sbroker": "subject", "raw": "limit"}
    out = []
    for key, value in figures.items():
        workload, metric, system = key.split("_", 2)
        out.append(_result(workload, metric, system, kinds.get(system, "peer"), value))
    return out


def _by_target(results: list[Result]) -> dict[str, tuple[bool | None, str, str]]:
    return {v.target: (v.met, v.figure, v.note) for v in verdicts(results)}


def test_every_target_is_judged_on_the_medians() -> None:
    got = _by_target(_run(
        W1_receive_sbroker=9000, W1_receive_huey=4000, W1_receive_raw=20000,
        W2_send_sbroker=30000, W2_send_rabbitmq=9000,
        W2_receive_sbroker=60000, W2_receive_rabbitmq=25000,
        W1_send_sbroker=8000, W3_send_sbroker=24000, W3_receive_sbroker=9000,
        W4_p99_sbroker=1.5))
    assert got["W1 receive >= 2x best peer"][:2] == (True, "9,000 vs huey 4,000 = 2.25x")
    assert got["W2 send >= 3x RabbitMQ"][:2] == (True, "30,000 vs 9,000 = 3.33x")
    assert got["W2 receive >= 3x RabbitMQ"][:2] == (False, "60,000 vs 25,000 = 2.40x")
    assert got["W3 send >= 3x sbroker's own W1 send"][:2] == (True, "3.00x")
    assert got["W3 receive >= 3x sbroker's own W1 receive"][:2] == (False, "1.00x")
    assert got["W4 p99 <= 50 ms"][:2] == (True, "1.50 ms")


def test_w1_says_when_raw_sqlite_itself_is_below_the_target() -> None:
    met, figure, note = _by_target(_run(
        W1_receive_sbroker=7000, W1_receive_huey=15000, W1_receive_litequeue=9000,
        W1_receive_raw=22000))["W1 receive >= 2x best peer"]
    assert (met, figure) == (False, "7,000 vs huey 15,000 = 0.47x")
    assert "22,000 msgs/s = 1.47x huey" in note
    assert "above what SQLite commits" in note


def test_w3_lists_every_systems_own_gain_best_first() -> None:
    results = _run(W1_receive_sbroker=8000, W3_receive_sbroker=2000,
                   W1_receive_huey=16000, W3_receive_huey=8000,
                   W1_receive_raw=20000, W3_receive_raw=9000,
                   W1_receive_litequeue=5000)  # no W3 figure: left out
    assert own_ratios(results, "receive") == {"sbroker": 0.25, "huey": 0.5, "raw": 0.45}
    met, figure, note = _by_target(results)["W3 receive >= 3x sbroker's own W1 receive"]
    assert (met, figure) == (False, "0.25x")
    assert note == ("3x is 24,000 msgs/s, raw SQLite's own W3 9,000; "
                    "own W3 / W1 in this run: huey 0.50x, raw 0.45x")


def test_a_missing_figure_is_not_measured_rather_than_missed() -> None:
    got = _by_target(_run(W1_receive_huey=15000, W4_p99_rabbitmq=2.0))
    assert all(met is None for met, _, _ in got.values())
    assert got["W1 receive >= 2x best peer"][1] == "n/a"


def test_each_sbroker_row_is_held_to_the_peers_of_its_own_backend() -> None:
    group = [_result("W1", "send", "sbroker", "subject", 12000),
             _result("W1", "send", "sbroker (postgres)", "subject", 2000),
             _result("W1", "send", "huey", "peer", 40000),
             _result("W1", "send", "postgres", "peer", 8000),
             _result("W1", "send", "procrastinate", "peer", 1000),
             _result("W1", "send", "rabbitmq", "peer", 90000)]  # a server: no one's peer
    ratios = {r.system: ratio(r, group) for r in group if r.kind == "subject"}
    assert {name: (round(v, 2), best.system) for name, (v, best) in ratios.items()} == {
        "sbroker": (0.3, "huey"), "sbroker (postgres)": (0.25, "postgres")}
    console = Console(width=200, record=True)
    console.print(table(group, {}, "t"))
    text = console.export_text()
    assert "0.30x vs huey" in text and "0.25x vs postgres" in text
