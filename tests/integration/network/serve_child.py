"""A `sbroker serve`-like child process: ``python serve_child.py DB``; prints ``PORT n`` once
the endpoint listens, and serves until SIGTERM/SIGINT (or kill -9)."""

from __future__ import annotations

import sys

from sbroker import Broker
from sbroker.cli.serve import run_serve


def ready(broker: Broker) -> None:
    address = broker.network.address
    print(f"PORT {address[1] if address else 0}", flush=True)


if __name__ == "__main__":
    sys.exit(run_serve(sys.argv[1], ready=ready))
