"""A fault-injecting TCP proxy on loopback for the network tests and the benchmark.

It listens on 127.0.0.1 (port 0 by default) and relays every connection to ``target``. Faults,
drawn from a seeded random generator:
- ``frame`` mode (endpoints without TLS): the byte stream is cut into protocol frames and
  dialog frames (fragments, acks) are dropped, duplicated, reordered or bit-flipped;
- ``bytes`` mode (works under TLS): chunks are delayed, bits flipped, connections cut.
Connections are also cut with ``p_cut`` per forwarded chunk/frame in both modes. ``pause()``
refuses new connections and cuts the open ones (a peer "down"), ``resume()`` undoes it.
"""

from __future__ import annotations

import asyncio
import random
import threading
from dataclasses import dataclass

from sbroker.protocol.framing import FrameDecoder

_DIALOG_TYPES = (6, 7)  # FRAGMENT, ACK


@dataclass
class Faults:
    mode: str = "frame"  # or "bytes"
    p_drop: float = 0.0
    p_dup: float = 0.0
    p_reorder: float = 0.0
    p_corrupt: float = 0.0
    p_cut: float = 0.0
    max_delay: float = 0.0  # seconds, uniform per chunk/frame
    spare_first: int = 0  # bytes mode: leave the first chunks of each direction alone
    max_corrupt: int | None = None  # stop corrupting after this many


@dataclass
class Counters:
    connections: int = 0
    frames: int = 0
    dropped: int = 0
    duplicated: int = 0
    reordered: int = 0
    corrupted: int = 0
    cuts: int = 0


class FaultProxy:
    """``FaultProxy(target_port, faults, seed).start() -> port``; ``stop()`` at the end."""

    def __init__(self, target_port: int, faults: Faults | None = None, seed: int = 0) -> None:
        self.target_port = target_port
        self.faults = faults or Faults()
        self.rng = random.Random(seed)
        self.counters = Counters()
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._paused = False

    # -- control (any thread) ---------------------------------------------------------------
    def start(self) -> int:
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            loop.run_until_complete(self._listen())
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=main, name="fault-proxy", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self.port

    def _call(self, fn: object) -> None:
        assert self._loop is not None and callable(fn)
        asyncio.run_coroutine_threadsafe(fn(), self._loop).result(10)

    def retarget(self, port: int) -> None:
        """Relay new connections to ``port`` (the peer restarted elsewhere)."""
        self.target_port = port

    def pause(self) -> None:
        self._paused = True
        self._call(self._cut_all)

    def resume(self) -> None:
        self._paused = False

    def cut_all(self) -> None:
        self._call(self._cut_all)

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            await self._cut_all()

        self._call(shutdown)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = None

    # -- loop side ----------------------------------------------------------------------------
    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accepted, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _cut_all(self) -> None:
        for w in list(self._writers):
            w.close()
        self._writers.clear()

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._paused:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self.counters.connections += 1
        self._writers.update((writer, up_writer))
        pair = (writer, up_writer)
        await asyncio.gather(
            self._relay(reader, up_writer, pair), self._relay(up_reader, writer, pair),
            return_exceptions=True,
        )
        for w in pair:
            w.close()
            self._writers.discard(w)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter]) -> None:
        f = self.faults
        decoder = FrameDecoder() if f.mode == "frame" else None
        held: bytes | None = None
        seen = 0
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                chunks = self._frames(decoder, data) if decoder is not None else [(0, data)]
                out: list[bytes] = []
                for ftype, chunk in chunks:
                    if self.rng.random() < f.p_cut:
                        self.counters.cuts += 1
                        for w in pair:
                            w.close()
                        return
                    seen += 1
                    faulty = (ftype in _DIALOG_TYPES) if decoder is not None else (
                        seen > f.spare_first)
                    self.counters.frames += 1
                    if faulty and self.rng.random() < f.p_drop:
                        self.counters.dropped += 1
                        continue
                    if faulty and self.rng.random() < f.p_corrupt and (
                            f.max_corrupt is None or self.counters.corrupted < f.max_corrupt):
                        self.counters.corrupted += 1
                        chunk = _flip(chunk, self.rng, decoder is not None)
                    if faulty and held is None and self.rng.random() < f.p_reorder:
                        self.counters.reordered += 1
                        held = chunk
                        continue
                    out.append(chunk)
                    if faulty and self.rng.random() < f.p_dup:
                        self.counters.duplicated += 1
                        out.append(chunk)
                    if held is not None:
                        out.append(held)
                        held = None
                if held is not None:  # reordering stays within one read: never stuck
                    out.append(held)
                    held = None
                if f.max_delay:
                    await asyncio.sleep(self.rng.uniform(0, f.max_delay))
                if out:
                    writer.write(b"".join(out))
                    await writer.drain()
        except (OSError, ConnectionError):
            pass
        finally:
            for w in pair:
                w.close()

    @staticmethod
    def _frames(decoder: FrameDecoder, data: bytes) -> list[tuple[int, bytes]]:
        decoder.feed(data)
        frames = []
        while (raw := decoder.next_frame()) is not None:
            frames.append((raw.ftype, raw.signed + raw.tag))
        return frames


def _flip(chunk: bytes, rng: random.Random, framed: bool) -> bytes:
    """Flip one bit; in a whole frame, past the 12-byte header (so only the MAC catches it)."""
    start = 12 if framed and len(chunk) > 12 else 0
    i = rng.randrange(start, len(chunk))
    b = bytearray(chunk)
    b[i] ^= 1 << rng.randrange(8)
    return bytes(b)
