"""``/metrics``: the figures of docs/dashboard.md in Prometheus text format, read from the
database at each scrape (a custom collector: no counters live in this process, so every
dashboard process reports the same totals, and they survive restarts)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sbroker.apps.dashboard.reader import STATES, Reader

__all__ = ["BrokerCollector", "exposition", "registry_for"]

# One sample per queue: (family, name, help, value from a queue_stats row).
PER_QUEUE: tuple[tuple[type[GaugeMetricFamily | CounterMetricFamily], str, str,
                       Callable[[dict[str, Any]], float]], ...] = (
    (GaugeMetricFamily, "sbroker_queue_oldest_message_age_seconds",
     "Age of the queue's oldest message (0 when empty)", lambda q: q["oldest_age"] or 0.0),
    (GaugeMetricFamily, "sbroker_queue_readers",
     "Activated readers running on the queue, in every process", lambda q: q["readers_running"]),
    (GaugeMetricFamily, "sbroker_queue_max_readers", "The queue's max_queue_readers",
     lambda q: q["max_queue_readers"] or 0),
    (GaugeMetricFamily, "sbroker_queue_enabled", "1 when the queue is enabled, 0 when disabled",
     lambda q: 1 if q["is_enabled"] else 0),
    (CounterMetricFamily, "sbroker_messages_enqueued", "Messages ever enqueued into the queue",
     lambda q: q["messages_enqueued_total"]),
    (CounterMetricFamily, "sbroker_messages_received", "Messages ever received from the queue",
     lambda q: q["messages_received_total"]),
)


class BrokerCollector(Collector):
    """Queue depths, ages, readers, status, transmission queue, conversations, tasks, and the
    counters kept in the database: messages enqueued and received, schedules' ticks."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader

    def collect(self) -> Iterator[Metric]:
        queues = self.reader.queues()
        messages = GaugeMetricFamily(
            "sbroker_queue_messages",
            "Messages in a queue: ready (receivable now) or locked (in a group a transaction "
            "holds)", labels=["queue", "state"])
        for q in queues:
            messages.add_metric([str(q["queue_name"]), "ready"], q["ready_messages"])
            messages.add_metric([str(q["queue_name"]), "locked"], q["locked_messages"])
        yield messages
        for kind, name, text, value in PER_QUEUE:
            family = kind(name, text, labels=["queue"])
            for q in queues:
                family.add_metric([str(q["queue_name"])], value(q))
            yield family

        transmission = GaugeMetricFamily("sbroker_transmission_queue_messages",
                                         "Messages waiting in the transmission queue",
                                         labels=["to_service"])
        for service, count in ((r["to_service_name"], r["messages"])
                               for r in self.reader.rows("metrics_transmission")):
            transmission.add_metric([str(service)], count)
        yield transmission

        conversations = GaugeMetricFamily("sbroker_conversations",
                                          "Conversation endpoints by state",
                                          labels=["state"])
        counts = {r["state"]: r["endpoints"] for r in self.reader.rows("conversation_states")}
        for state in STATES:
            conversations.add_metric([state], counts.get(state, 0))
        yield conversations

        tasks = GaugeMetricFamily("sbroker_scheduler_tasks",
                                  "ExecutionLog rows by status (absent before install_executor)",
                                  labels=["status"])
        for status, count in (self.reader.task_counts() or {}).items():
            tasks.add_metric([status], count)
        yield tasks

        schedule_runs = CounterMetricFamily(
            "sbroker_schedule_runs",
            "Ticks of each schedule: started (a run, by its timer or a backfill), skipped (not"
            " run: max_active_runs going, or the tick had a run), missed (dropped: catchup ="
            " false)", labels=["schedule", "outcome"])
        for row in self.reader.rows("schedule_runs_total"):
            schedule_runs.add_metric([str(row["schedule"]), str(row["outcome"])], row["total"])
        yield schedule_runs


def registry_for(reader: Reader) -> CollectorRegistry:
    """A registry of its own holding only this broker's collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(reader))
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """The text format of one scrape."""
    return generate_latest(registry)
