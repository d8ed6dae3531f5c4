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

Figures are printed, never asserted.  ``--rounds``, ``--w1`` and ``--w4`` set the sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MODES = ("main", "absent", "api", "provider", "none")
HERE = Path(__file__).resolve().parent.parent


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
    from bench.systems.sbroker import Sbroker
    from bench.workloads import Sizes, w1, w4

    sizes = Sizes(w1=w1_n, w2=0, w3=0, w4=w4_n)
    out: dict[str, float] = {}
    for name, workload in (("W1", w1), ("W4", w4)):
        system = Sbroker(None)  # type: ignore[arg-type] - SQLite needs no server
        with tempfile.TemporaryDirectory() as tmp:
            system.setup(Path(tmp), "normal")
            try:
                figures = workload(system, sizes)
            finally:
                system.teardown()
        out.update({f"{name} {key}": value for key, value in figures.items()})
    from sbroker.core import messages

    out["traced"] = float("trace_context" in messages.Message.__dataclass_fields__ and
                          sys.modules.get("sbroker.core.tracing") is not None and
                          sys.modules["sbroker.core.tracing"].TRACER is not None)
    return out


def _run_child(mode: str, args: argparse.Namespace) -> dict[str, float]:
    src = args.main_src if mode == "main" else str(HERE / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, str(HERE)])}
    done = subprocess.run(
        [sys.executable, "-m", "bench.tracing", "--child", mode, "--w1", str(args.w1),
         "--w4", str(args.w4)], env=env, cwd=HERE, capture_output=True, text=True,
        check=True, timeout=900)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
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
    keys = ["W1 send", "W1 receive", "W4 p50", "W4 p99"]
    print(f"\nW1 {args.w1:,} msgs, W4 {args.w4:,} msgs, SQLite durability=normal; medians of "
          f"{args.rounds} paired rounds (W1 msgs/s, W4 ms); load average after: "
          f"{os.getloadavg()}")
    print(f"{'mode':<10}" + "".join(f"{k:>14}" for k in keys) + f"{'traced':>8}")
    for mode in modes:
        cells = "".join(f"{statistics.median(r[k] for r in runs[mode]):>14.2f}" for k in keys)
        print(f"{mode:<10}{cells}{int(runs[mode][0]['traced']):>8}")


if __name__ == "__main__":
    main()
