"""`python -m bench.network` runs on both backends: every message sent on A is in B's queue
and acknowledged back (transfer), and received by B's application (end to end)."""

from __future__ import annotations

import pytest

from bench import network
from bench.servers import databases

ENDPOINT = {"encryption": "supported", "retry_initial": 2.0}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_transfer_and_end_to_end_deliver_every_message(backend: str) -> None:
    with databases(backend) as new:
        transfer = network.run(200, 10, 256, None, ENDPOINT, end_to_end=False, new=new)
        e2e = network.run(200, 10, 256, None, ENDPOINT, end_to_end=True, new=new)
    assert transfer["messages"] == 200 and transfer["msg_per_s"] > 0, transfer
    assert e2e["messages"] == 200 and e2e["msg_per_s"] > 0, e2e
