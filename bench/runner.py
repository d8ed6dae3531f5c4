"""Runs workloads x systems x runs, interleaving systems within each run, and keeps every figure."""

from __future__ import annotations

import contextlib
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from bench.servers import ServerPool
from bench.systems import Durability, System, Unavailable
from bench.workloads import Sizes, Workload

S = TypeVar("S", bound=System)


@dataclass
class Result:
    """One figure of one system in one workload: every run's value, or why there is none."""

    workload: str
    metric: str
    unit: str
    higher_is_better: bool
    system: str
    kind: str
    values: list[float] = field(default_factory=list)
    na: str | None = None

    @property
    def median(self) -> float | None:
        """The median over runs, or None if n/a."""
        return statistics.median(self.values) if self.values and not self.na else None

    def to_json(self) -> dict[str, object]:
        """A plain dict for the results file."""
        return {**self.__dict__, "median": self.median,
                "min": min(self.values, default=None), "max": max(self.values, default=None)}


@contextlib.contextmanager
def fresh(system: S, durability: Durability = "normal") -> Iterator[S]:
    """``system`` set up in a new temp dir; torn down, and the dir removed, after."""
    workdir = Path(tempfile.mkdtemp(prefix="sbroker-bench-"))
    try:
        system.setup(workdir, durability)
        try:
            yield system
        finally:
            system.teardown()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def num(value: float, unit: str) -> str:
    """A figure rounded for reading: ms to 0.01, rates to whole messages."""
    return f"{value:.2f}" if unit == "ms" else f"{value:,.0f}"


class Suite:
    """Each planned workload against its systems, `runs` times, systems interleaved per run."""

    def __init__(self, plan: list[tuple[Workload, list[type[System]]]], sizes: Sizes,
                 runs: int, durability: Durability, log: Callable[[str], None]) -> None:
        self.plan, self.sizes = plan, sizes
        self.runs, self.durability, self.log = runs, durability, log
        self.results: list[Result] = []
        self.notes: dict[str, dict[str, str]] = {}

    def _results_for(self, w: Workload, cls: type[System]) -> dict[str, Result]:
        made = {m.key: Result(w.name, m.key, m.unit, m.higher_is_better, cls.name, cls.kind)
                for m in w.metrics}
        self.results.extend(made.values())
        return made

    def run(self, pool: ServerPool) -> list[Result]:
        """Run everything; failures and missing systems become n/a with their reason."""
        for w, systems in self.plan:
            self.log(f"[bold]{w.name}[/] {w.describe(self.sizes)}, durability {self.durability}")
            table: dict[str, dict[str, Result]] = {}
            live: list[type[System]] = []
            for cls in systems:
                table[cls.name] = self._results_for(w, cls)
                self.notes.setdefault(cls.name, {"waits_by": cls.waits_by, "kind": cls.kind})
                na = w.not_applicable(cls)
                for key, reason in na.items():
                    table[cls.name][key].na = reason
                try:
                    cls.check()
                    if len(na) < len(w.metrics):
                        live.append(cls)
                except Unavailable as exc:
                    self._mark_na(table[cls.name], str(exc))
            for r in range(self.runs):
                for cls in list(live):
                    if not self._run_once(w, cls, pool, table[cls.name], r):
                        live.remove(cls)
        return self.results

    @staticmethod
    def _mark_na(results: dict[str, Result], reason: str) -> None:
        for res in results.values():
            if not res.na:  # a "no equivalent" reason stays: it says more
                res.na, res.values = reason, []

    def _run_once(self, w: Workload, cls: type[System], pool: ServerPool,
                  results: dict[str, Result], r: int) -> bool:
        """One fresh run of `cls` on `w`; False when the system is out for this workload."""
        t0 = time.perf_counter()
        try:
            with fresh(cls(pool), self.durability) as system:
                self.notes[cls.name]["durability"] = system.durability_note(self.durability)
                figures = w.run(system, self.sizes)
        except Unavailable as exc:
            self._mark_na(results, str(exc))
            self.log(f"  {cls.name}: n/a ({exc})")
            return False
        except Exception as exc:
            self._mark_na(results, f"failed: {type(exc).__name__}: {exc}")
            self.log(f"  [red]{cls.name} failed[/]: {type(exc).__name__}: {exc}")
            return False
        shown = []
        for key, value in figures.items():
            if results[key].na:
                continue
            results[key].values.append(value)
            shown.append(f"{key} {num(value, results[key].unit)} {results[key].unit}")
        self.log(f"  {w.name} run {r + 1}/{self.runs} {cls.name:<14} {'  '.join(shown)}"
                 f"  [dim]({time.perf_counter() - t0:.1f} s)[/]")
        return True
