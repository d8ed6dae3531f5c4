"""What both backends remember for SENDs that go straight into a local peer's queue: the
conversations whose peer was last seen conversing (see :class:`~sbroker.storage.ports.SendPath`)."""

from __future__ import annotations

import contextlib

PEERS_KEPT = 10_000  # conversations remembered (the oldest go first)


class PeerMemory:
    """Sender handle -> its conversing local peer's (rowid, queue): a hint, which the
    backend's direct statement checks in the database."""

    def __init__(self) -> None:
        self._peers: dict[str, tuple[int, int]] = {}

    def peer(self, handle: str) -> tuple[int, int] | None:
        return self._peers.get(handle)

    def learn(self, handle: str, peer: int, peer_queue: int) -> None:
        peers = self._peers
        if handle not in peers and len(peers) >= PEERS_KEPT:
            with contextlib.suppress(StopIteration, KeyError, RuntimeError):
                del peers[next(iter(peers))]  # other threads may change it meanwhile
        peers[handle] = (peer, peer_queue)

    def forget(self, handle: str) -> None:
        self._peers.pop(handle, None)
