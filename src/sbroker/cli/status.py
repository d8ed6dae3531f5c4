"""``status`` (a summary, or the views named) and ``views`` (the names it accepts)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.table import Table

from sbroker.cli.common import SQL_VIEWS, Broker, fail_cleanly, open_broker
from sbroker.cli.tables import cell, print_views

# Views the network service adds to every broker (the stored ones are SQL_VIEWS).
SERVICE_VIEWS = ("dm_broker_connections", "dm_broker_partial_messages")
RECENT_TASKS = 10


@click.command()
@click.argument("views", nargs=-1)
@click.pass_context
@fail_cleanly
def status(ctx: click.Context, views: tuple[str, ...]) -> None:
    """A summary: queues (ready and locked messages), conversations, transmission queue,
    and the scheduler's ExecutionLog and ExecutionStatus. With VIEWS, print those views
    (`sbroker views` lists them)."""
    console = Console()
    with open_broker(ctx) as b:
        if views:
            print_views(b, list(views), console)
        else:
            summary(b, console, ctx.obj["db"])


def summary(b: Broker, console: Console, name: str) -> None:
    """The default ``status``: what an operator looks at first."""
    console.print(f"[bold]{name}[/bold]  broker_instance {b.broker_instance}")
    table = _table("queue", "ready", "locked", "readers", "status")
    for q in b.view("queue_stats"):  # readers of every process on the database
        readers = (f"{q['readers_running']} of {q['max_queue_readers']}"
                   if q["is_activation_enabled"] else "off")
        state = "enabled" if q["is_enabled"] else (
            f"[red]disabled[/red]: sbroker queue enable {q['queue_name']}")
        table.add_row(q["queue_name"], str(q["ready_messages"]), str(q["locked_messages"]),
                      readers, state)
    console.print(table)
    endpoints = Counter(r["state_desc"] for r in b.view("conversation_endpoints"))
    console.print(f"conversation endpoints: {sum(endpoints.values())}"
                  + "".join(f", {n} {s}" for s, n in sorted(endpoints.items())))
    waiting = b.view("transmission_queue")
    reasons = Counter(r["transmission_status"] or "not tried yet" for r in waiting)
    console.print(f"transmission queue: {len(waiting)} message(s)"
                  + "".join(f"\n  {n}: {why}" for why, n in reasons.most_common(3)),
                  highlight=False)
    _scheduler(b, console)


def _scheduler(b: Broker, console: Console) -> None:
    if "ServiceAsyncTarget" not in b.catalog.services:
        return  # the executor was never installed here
    log = b.view("ExecutionLog")
    running = b.view("ExecutionStatus")
    counts = Counter(r["Status"] for r in log)
    console.print(f"ExecutionLog: {len(log)} task(s)"
                  + "".join(f", {n} {s}" for s, n in sorted(counts.items())))
    if running:
        table = _table("ExecutionStatus", "log id", "since", "task", title=True)
        for r in running:
            table.add_row(str(r["Worker"]), str(r["LogID"]), cell(r["StartTime"], "StartTime"),
                          _task_label(r["Task"]))
        console.print(table)
    if log:
        table = _table(f"last {min(len(log), RECENT_TASKS)} tasks", "status", "ended",
                       "task / error", title=True)
        for r in log[-RECENT_TASKS:]:
            text = _task_label(r["Task"]) + (f": {r['Error']}" if r["Error"] else "")
            table.add_row(str(r["LogID"]), r["Status"], cell(r["EndTime"], "EndTime"), text)
        console.print(table)


def _table(first: str, *others: str, title: bool = False) -> Table:
    """A compact table: the last column gives way when the terminal is narrow."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title=first if title else None,
                  title_justify="left", title_style="bold")
    table.add_column("log id" if title else first, no_wrap=True)
    for i, name in enumerate(others):
        last = i == len(others) - 1
        table.add_column(name, no_wrap=not last, overflow="ellipsis" if last else "fold",
                         justify="right" if name in ("ready", "locked", "log id") else "left")
    return table


def _task_label(task: Any) -> str:
    """A task's JSON (ExecutionLog.Task) as its SQL or Python target, on one line."""
    try:
        data = json.loads(task)
    except (TypeError, ValueError):
        return str(task)
    text = data.get("sql") or data.get("target") or str(task)
    return " ".join(str(text).split())


@click.command("views")
def list_views() -> None:
    """List the view names ``status`` accepts."""
    for name in (*SQL_VIEWS, *SERVICE_VIEWS, "ExecutionLog", "ExecutionStatus"):
        click.echo(name)


COMMANDS = [status, list_views]
