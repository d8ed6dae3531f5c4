"""`python -m bench.tracing`: what tracing (docs/tracing.md) costs W1 and W4 on SQLite.

Five modes, each round running every mode once in a fresh child process (the order turns
each round, so that a change of the machine's load hits all alike), and medians printed:

- ``main``:      another version's sbroker, only with ``--main-src PATH`` (the ``src`` folder of
                 e.g. ``git archive`` of the commit to compare with)
- ``absent``:    the ``otel`` extra missing (its import blocked in the child)
- ``api``:       the API imported, no tracer provider set (the default proxy provider)
- ``provider``:  an SDK provider with a batch processor feeding an exporter that drops spans
- ``none``:      ``absent`` again, run last in each round: the spread between two runs of the
                 same code is the noise the others are judged by

Each child also reports the process's CPU time per W1 message (all its threads: the writer
and the span exporter too), which a loaded machine moves less than the rates.  Figures are
printed, never asserted.  ``--rounds``, ``--w1`` and ``--w4`` set the sizes.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from bench.measure import child_json

MODES = ("main", "absent", "api", "provider", "none")


def _block_opentelemetry() -> None:
    """Make ``import opentelemetry`` fail, as when the extra is not installed."""
    for name in [n for n in sys.modules if n == "opentelemetry" or n.startswith("opentelemetry.")]:
        del sys.modules[name]
    sys.modules["opentelemetry"] = None  # type: ignore[assignment]


def _set_provider() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Drop(SpanExporter):
        """An exporter that sends nothing anywhere."""

        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)


def child(mode: str, w1_n: int, w4_n: int) -> dict[str, float]:
    """One run of W1 and W4 in this process, in ``mode``."""
    if mode in ("main", "absent", "none"):
        _block_opentelemetry()
    elif mode == "api":
        import opentelemetry.trace  # noqa: F401 - loaded, no provider set
    else:
        _set_provider()
    from bench.runner import fresh
    from bench.systems.sbroker import Sbroker
    from bench.workloads import Sizes, w1, w4

    sizes = Sizes(w1=w1_n, w2=0, w3=0, w4=w4_n)
    out: dict[str, float] = {}

    @contextlib.contextmanager
    def cpu(phase: str) -> Iterator[None]:
        start = time.process_time()
        yield
        out[f"W1 {phase} cpu"] = (time.process_time() - start) / w1_n * 1e6

    for name, workload in (("W1", functools.partial(w1, around=cpu)), ("W4", w4)):
        with fresh(Sbroker(None)) as system:  # type: ignore[arg-type] - SQLite: no server
            out.update({f"{name} {k}": v for k, v in workload(system, sizes).items()})
    # OpenTelemetry's instrumentation is imported only when a broker took it (main: the
    # module-global tracer of the version before the instrumentation hooks)
    old = sys.modules.get("sbroker.core.tracing")
    out["traced"] = float("sbroker.apps.tracing.otel" in sys.modules or (
        old is not None and getattr(old, "TRACER", None) is not None))
    return out


def _run_child(mode: str, args: argparse.Namespace) -> dict[str, float]:
    result: dict[str, float] = child_json(
        ["-m", "bench.tracing", "--child", mode, "--w1", str(args.w1), "--w4", str(args.w4)],
        src=args.main_src if mode == "main" else None)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--w1", type=int, default=3000, help="W1 messages (default 3,000)")
    parser.add_argument("--w4", type=int, default=200, help="W4 messages (default 200)")
    parser.add_argument("--main-src", default="",
                        help="src folder of another version to run as the 'main' mode")
    parser.add_argument("--child", choices=MODES)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.w1, args.w4)))
        return
    modes = [m for m in MODES if m != "main" or (args.main_src and Path(args.main_src).is_dir())]
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    print(f"load average before: {os.getloadavg()}", flush=True)
    for r in range(args.rounds):
        order = modes[r % len(modes):] + modes[:r % len(modes)]
        for mode in order:
            runs[mode].append(_run_child(mode, args))
        print(f"round {r + 1}/{args.rounds} done, load {os.getloadavg()[0]:.2f}", flush=True)
    keys = ["W1 send", "W1 receive", "W4 p50", "W4 p99", "W1 send cpu", "W1 receive cpu"]
    print(f"\nW1 {args.w1:,} msgs, W4 {args.w4:,} msgs, SQLite durability=normal; medians of "
          f"{args.rounds} paired rounds (W1 msgs/s, W4 ms, W1 CPU us/msg); load average "
          f"after: {os.getloadavg()}")
    print(f"{'mode':<10}" + "".join(f"{k:>14}" for k in keys) + f"{'traced':>8}")
    for mode in modes:
        cells = "".join(f"{statistics.median(r[k] for r in runs[mode]):>14.2f}" for k in keys)
        print(f"{mode:<10}{cells}{int(runs[mode][0]['traced']):>8}")
    base = {k: statistics.median(r[k] for r in runs["absent"]) for k in keys}
    for mode in modes:
        if mode != "absent":  # rates: higher is better; CPU: the ratio of absent's to this
            ratios = ", ".join(f"{k} {statistics.median(r[k] for r in runs[mode]) / base[k]:.2f}x"
                               if "cpu" not in k else
                               f"{k} {base[k] / statistics.median(r[k] for r in runs[mode]):.2f}x"
                               for k in keys if k.startswith("W1"))
            print(f"{mode} / absent: {ratios}")


if __name__ == "__main__":
    main()
