"""RabbitMQ through pika: durable queue, persistent messages, publisher confirms, manual acks."""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path
from typing import Any

from bench.systems.base import Client, Durability, System


class RabbitClient(Client):
    """One connection and channel per thread; a send returns once RabbitMQ confirmed it.

    pika's blocking channel can only wait for one confirm per publish, so confirms are
    turned on at the channel underneath (`_impl`) and counted here, waiting the way pika's
    own confirm wait does (`_flush_output`): a batch of 100 is published and then waited for
    as one unit, the RabbitMQ docs' "publishing in batches" strategy.
    """

    def __init__(self, params: Any, queue: str) -> None:
        import pika

        self.queue = queue
        self.props = pika.BasicProperties(delivery_mode=2)
        self.conn = pika.BlockingConnection(params)
        self.channel = self.conn.channel()
        self.unconfirmed: set[int] = set()
        self.published = 0
        self.nacked = False
        self.confirming = False
        self.channel._impl.confirm_delivery(ack_nack_callback=self._on_confirm,
                                            callback=self._on_select_ok)
        self.channel._flush_output(lambda: self.confirming)
        self.buffer: deque[tuple[int, bytes]] = deque()
        self.consuming = False

    def _on_select_ok(self, _: Any) -> None:
        self.confirming = True

    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        tag = method.delivery_tag
        if method.NAME != "Basic.Ack":
            self.nacked = True
        if method.multiple:
            self.unconfirmed = {t for t in self.unconfirmed if t > tag}
        else:
            self.unconfirmed.discard(tag)

    def _wait_for_delivery(self, timeout: float) -> None:
        """Process I/O until a delivery is buffered or `timeout` s pass."""
        deadline = time.perf_counter() + timeout
        while not self.buffer:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return
            self.conn.process_data_events(time_limit=remaining)

    def send_batch(self, bodies: list[bytes]) -> None:
        for body in bodies:
            self.published += 1  # before publishing: its confirm may come during the call
            self.unconfirmed.add(self.published)
            self.channel.basic_publish("", self.queue, body, self.props)
        self.channel._flush_output(lambda: not self.unconfirmed)  # as pika's own confirm wait
        if self.nacked:
            raise RuntimeError("RabbitMQ nacked a message")

    def send_one(self, body: bytes) -> None:
        self.send_batch([body])

    def _on_message(self, _ch: Any, method: Any, _props: Any, body: bytes) -> None:
        self.buffer.append((method.delivery_tag, body))

    def receive_batch(self, n: int, timeout: float) -> list[bytes]:
        if not self.consuming:
            self.channel.basic_qos(prefetch_count=n)
            self.channel.basic_consume(self.queue, self._on_message, auto_ack=False)
            self.consuming = True
        self._wait_for_delivery(timeout)
        before = -1
        while len(self.buffer) < n and len(self.buffer) != before:
            before = len(self.buffer)  # take what has already arrived, without waiting
            self.conn.process_data_events(time_limit=0)
        got = [self.buffer.popleft() for _ in range(min(n, len(self.buffer)))]
        if got:
            self.channel.basic_ack(delivery_tag=got[-1][0], multiple=True)
        return [body for _, body in got]

    def receive_one(self, timeout: float) -> bytes | None:
        got = self.receive_batch(1, timeout)
        return got[0] if got else None

    def close(self) -> None:
        if self.conn.is_open:
            self.conn.close()


class RabbitMQ(System):
    """A fresh durable classic queue per run on the suite's loopback RabbitMQ node."""

    name = "rabbitmq"
    backend = "rabbitmq"
    module = "pika"
    servers = ("rabbitmq",)
    waits_by = "basic_consume push (prefetch 1)"
    runs = 0

    def durability_note(self, durability: Durability) -> str:
        return "persistent msgs, confirm after fsync (its only setting)"

    def setup(self, workdir: Path, durability: Durability) -> None:
        import pika

        RabbitMQ.runs += 1
        self.params = self.pool.get("rabbitmq").params()  # type: ignore[attr-defined]
        self.queue = f"bench-{RabbitMQ.runs}"
        with pika.BlockingConnection(self.params) as conn:
            conn.channel().queue_declare(self.queue, durable=True)

    def client(self, slot: int = 0, slots: int = 1) -> Client:
        return RabbitClient(self.params, self.queue)

    def teardown(self) -> None:
        import pika

        with pika.BlockingConnection(self.params) as conn:
            conn.channel().queue_delete(self.queue)
