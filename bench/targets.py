"""The suite's targets, judged on one run's medians, each with the figures that bound it.

On SQLite: W1 receive >= 2x the best peer; W2 send and receive >= 3x RabbitMQ; W3 >= 3x
sbroker's own W1; W4 p99 <= 50 ms. On PostgreSQL, against the raw SKIP LOCKED queue: W2 >= 1x,
W1 receive >= 0.7x. Two of them compare a figure with another figure of the
same run, so each verdict says beside it what the same run shows about the bound:
- W1: raw SQLite's own receive, one DELETE ... RETURNING per committed transaction, against
  twice the best peer: a receive in its own transaction needs a commit of its own.
- W3 is held to sbroker's own W1, so the verdict lists every system's own W3 / W1 in the same
  run: how much 8 producers and 8 consumers gain over one thread on this machine and
  durability, for the peers and raw SQLite as for sbroker.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from bench.report import best_peer, groups
from bench.runner import Result


@dataclass(frozen=True)
class Verdict:
    """One target: its words, the figure that judges it, met or not (None: a figure is n/a),
    and what the same run shows beside it."""

    target: str
    figure: str
    met: bool | None
    note: str = ""

    def line(self) -> str:
        """One line for the console."""
        word = {True: "met", False: "missed", None: "not measured"}[self.met]
        return f"{self.target}: {self.figure} -> {word}" + (f"; {self.note}" if self.note else "")

    def to_json(self) -> dict[str, object]:
        """A plain dict for the results file."""
        return asdict(self)


def _of(group: list[Result], kind: str, system: str | None = None) -> float | None:
    """The median of the first result of ``kind`` (or of ``system``) in a group, if any."""
    return next((r.median for r in group if r.median is not None and r.kind == kind
                 and system in (None, r.system)), None)


def w1_verdict(results: list[Result]) -> Verdict:
    """W1 receive >= 2x the best peer, with raw SQLite's receive beside it."""
    target = "W1 receive >= 2x best peer"
    group = groups(results).get(("W1", "receive"), [])
    ours, best = _of(group, "subject", "sbroker"), best_peer(group)
    if ours is None or best is None or not best.median:
        return Verdict(target, "n/a", None)
    name, peer = best.system, best.median
    raw = _of(group, "limit")
    note = ""
    if raw is not None:
        note = (f"raw SQLite, one commit per receive and nothing else: {raw:,.0f} msgs/s = "
                f"{raw / peer:.2f}x {name}")
        if raw < 2 * peer:
            note += ", so 2x is above what SQLite commits one receive at a time here"
    return Verdict(target, f"{ours:,.0f} vs {name} {peer:,.0f} = {ours / peer:.2f}x",
                   ours >= 2 * peer, note)


def ratio_verdict(results: list[Result], target: str, workload: str, metric: str,
                  ours: str, other: str, factor: float) -> Verdict:
    """``ours`` >= ``factor`` x ``other`` on one figure of one workload."""
    group = groups(results).get((workload, metric), [])
    mine, theirs = _of(group, "subject", ours), _of(group, "peer", other)
    if mine is None or not theirs:
        return Verdict(target, "n/a", None)
    return Verdict(target, f"{mine:,.0f} vs {theirs:,.0f} = {mine / theirs:.2f}x",
                   mine >= factor * theirs)


def own_ratios(results: list[Result], metric: str) -> dict[str, float]:
    """Each system's W3 / W1 median of ``metric`` (the gain of 8+8 threads over one)."""
    by_figure = groups(results)
    w1 = {r.system: r.median for r in by_figure.get(("W1", metric), []) if r.median}
    return {r.system: r.median / w1[r.system] for r in by_figure.get(("W3", metric), [])
            if r.median is not None and r.system in w1}


def w3_verdicts(results: list[Result]) -> list[Verdict]:
    """W3 >= 3x sbroker's own W1, send and receive, with every system's own ratio beside."""
    out = []
    kinds = {r.system: r.kind for r in results}
    by_figure = groups(results)
    for metric in ("send", "receive"):
        target = f"W3 {metric} >= 3x sbroker's own W1 {metric}"
        ratios = own_ratios(results, metric)
        ours = ratios.get("sbroker")
        w1 = _of(by_figure.get(("W1", metric), []), "subject", "sbroker")
        if ours is None or w1 is None:
            out.append(Verdict(target, "n/a", None))
            continue
        notes = [f"3x is {3 * w1:,.0f} msgs/s"]
        raw = _of(by_figure.get(("W3", metric), []), "limit")
        if raw is not None:
            notes[0] += f", raw SQLite's own W3 {raw:,.0f}"
        others = sorted(((n, v) for n, v in ratios.items() if kinds[n] != "subject"),
                        key=lambda p: -p[1])
        if others:
            notes.append("own W3 / W1 in this run: "
                         + ", ".join(f"{n} {v:.2f}x" for n, v in others))
        out.append(Verdict(target, f"{ours:.2f}x", ours >= 3, "; ".join(notes)))
    return out


def w4_verdict(results: list[Result]) -> Verdict:
    """W4 p99 <= 50 ms."""
    target = "W4 p99 <= 50 ms"
    ours = _of(groups(results).get(("W4", "p99"), []), "subject", "sbroker")
    if ours is None:
        return Verdict(target, "n/a", None)
    return Verdict(target, f"{ours:.2f} ms", ours <= 50)


def verdicts(results: list[Result]) -> list[Verdict]:
    """Every target: SQLite's, then PostgreSQL's (against the raw SKIP LOCKED queue)."""
    w2 = [ratio_verdict(results, f"W2 {m} >= 3x RabbitMQ", "W2", m, "sbroker", "rabbitmq", 3)
          for m in ("send", "receive")]
    pg = [ratio_verdict(results, f"{w} {m} on PostgreSQL >= {f:g}x raw postgres", w, m,
                        "sbroker (postgres)", "postgres", f)
          for w, m, f in (("W2", "send", 1.0), ("W2", "receive", 1.0), ("W1", "receive", 0.7))]
    return [w1_verdict(results), *w2, *w3_verdicts(results), w4_verdict(results), *pg]
