"""``init``, ``send``, ``receive``, ``peek``: create a database, move and look at messages."""

from __future__ import annotations

import json

import click

from sbroker.cli.common import fail_cleanly, open_broker
from sbroker.core.messages import Message


@click.command()
@click.option("--queue", "queues", multiple=True, help="Create this queue (repeatable).")
@click.option("--service", "services", multiple=True, metavar="NAME:QUEUE[:CONTRACT,...]",
              help="Create a service on a queue, accepting the contracts (repeatable).")
@click.pass_context
@fail_cleanly
def init(ctx: click.Context, queues: tuple[str, ...], services: tuple[str, ...]) -> None:
    """Create the database (if needed), and optionally queues and services."""
    with open_broker(ctx, create=True) as b:
        existing = set(b.catalog.queues)
        for q in queues:
            if q not in existing:
                b.create_queue(q)
        for spec in services:
            parts = spec.split(":")
            if len(parts) not in (2, 3) or not all(parts[:2]):
                raise click.BadParameter(
                    f"{spec!r}: expected NAME:QUEUE or NAME:QUEUE:CONTRACT[,CONTRACT]",
                    param_hint="--service",
                )
            contracts = parts[2].split(",") if len(parts) == 3 and parts[2] else []
            if parts[0] not in b.catalog.services:
                b.create_service(parts[0], parts[1], contracts)
        click.echo(f"{ctx.obj['db']}: broker_instance {b.broker_instance}")


@click.command()
@click.option("--from", "from_service", help="Initiator service (begins a new dialog).")
@click.option("--to", "to_service", help="Target service name.")
@click.option("--contract", default="DEFAULT", show_default=True)
@click.option("--handle", help="Send on this existing conversation instead of a new dialog.")
@click.option("--type", "message_type", default="DEFAULT", show_default=True)
@click.option("--end", is_flag=True, help="End the conversation after sending.")
@click.argument("body", default="")
@click.pass_context
@fail_cleanly
def send(ctx: click.Context, from_service: str | None, to_service: str | None, contract: str,
         handle: str | None, message_type: str, end: bool, body: str) -> None:
    """Send BODY (use - to send standard input's bytes exactly as they are, a final newline
    included); prints the conversation handle."""
    payload: str | bytes = body
    if body == "-":
        payload = click.get_binary_stream("stdin").read()
    if handle is None and not (from_service and to_service):
        raise click.UsageError("give --handle, or --from and --to to begin a new dialog")
    with open_broker(ctx) as b, b.transaction() as tx:
        if handle is None:
            assert from_service and to_service
            handle = tx.begin_dialog(from_service, to_service, contract)
        tx.send(handle, message_type, payload)
        if end:
            tx.end_conversation(handle)
    click.echo(handle)


@click.command()
@click.argument("queue")
@click.option("--top", type=click.IntRange(min=1), help="At most this many messages.")
@click.option("--timeout", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Seconds to wait for a message.")
@click.option("--end", is_flag=True, help="End each conversation an EndDialog/Error arrives on.")
@click.pass_context
@fail_cleanly
def receive(ctx: click.Context, queue: str, top: int | None, timeout: float, end: bool) -> None:
    """Receive from QUEUE and print each message as a JSON line."""
    with open_broker(ctx) as b, b.transaction() as tx:
        messages = tx.receive(queue, top=top, timeout=timeout)
        for msg in messages:
            click.echo(json.dumps(message_json(msg)))
            if end and (msg.is_end_dialog or msg.is_error):
                tx.end_conversation(msg.conversation_handle)
    if not messages:
        click.echo(f"(no message in {queue})", err=True)


@click.command()
@click.argument("queue")
@click.option("--top", type=click.IntRange(min=1), help="At most this many messages.")
@click.pass_context
@fail_cleanly
def peek(ctx: click.Context, queue: str, top: int | None) -> None:
    """Look at QUEUE's messages in RECEIVE order without receiving them (JSON lines)."""
    with open_broker(ctx) as b:
        messages = b.peek(queue, top=top)
    for msg in messages:
        click.echo(json.dumps({"status": msg.status, "queuing_order": msg.queuing_order,
                               **message_json(msg)}))
    if not messages:
        click.echo(f"(no message in {queue})", err=True)


def message_json(msg: Message) -> dict[str, object]:
    """What ``receive`` and ``peek`` print of a message (its body as text)."""
    return {
        "conversation_handle": msg.conversation_handle,
        "conversation_group_id": msg.conversation_group_id,
        "message_sequence_number": msg.message_sequence_number,
        "message_type_name": msg.message_type_name,
        "service_name": msg.service_name,
        "priority": msg.priority,
        "body": msg.message_body.decode("utf-8", errors="replace"),
    }


COMMANDS = [init, send, receive, peek]
