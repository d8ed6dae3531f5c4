"""Randomness for the protocol transport: retry jitter need not cost a system call each."""

from __future__ import annotations

import os
import random


class TransportRandom(random.Random):
    """Retry jitter from a fast generator seeded by the OS; random bits (handshake nonces)
    straight from the OS, as `random.SystemRandom` gives them."""

    def __init__(self) -> None:
        super().__init__(os.urandom(32))

    def getrandbits(self, k: int, /) -> int:
        if k <= 0:
            return 0
        return int.from_bytes(os.urandom((k + 7) // 8), "big") >> (-k % 8)
