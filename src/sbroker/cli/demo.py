"""A short tour of a dialog: begin, send, receive, reply, end — with the views printed."""

from __future__ import annotations

import click
from rich.console import Console

from sbroker.cli.common import Broker, fail_cleanly
from sbroker.cli.tables import print_views


def run_demo(target: str, console: Console) -> None:
    """Run the demo against ``target`` (created if needed; objects are reused if present)."""
    with Broker.open(target) as b:
        cat = b.catalog
        if "OrderRequest" not in cat.message_types:
            b.create_message_type("OrderRequest", "well_formed_json")
            b.create_message_type("OrderReply", "well_formed_json")
            b.create_contract("OrderContract", {"OrderRequest": "initiator",
                                                "OrderReply": "target"})
        if "ShopQueue" not in cat.queues:
            b.create_queue("ShopQueue")
            b.create_queue("WarehouseQueue")
            b.create_service("ShopService", "ShopQueue")
            b.create_service("WarehouseService", "WarehouseQueue", ["OrderContract"])
        console.rule("1. the shop begins a dialog and sends two orders")
        with b.transaction() as tx:
            handle = tx.begin_dialog("ShopService", "WarehouseService", "OrderContract")
            tx.send(handle, "OrderRequest", '{"order": 1, "item": "widget", "qty": 3}')
            tx.send(handle, "OrderRequest", '{"order": 2, "item": "gadget", "qty": 1}')
        _show(b, console)
        console.rule("2. the warehouse receives them (one conversation group, in order)")
        with b.transaction() as tx:
            orders = tx.receive("WarehouseQueue")
            for msg in orders:
                console.print(f"  received #{msg.message_sequence_number} "
                              f"{msg.message_type_name}: {msg.text()}")
                order = msg.json()
                tx.send(msg.conversation_handle, "OrderReply",
                        f'{{"order": {order["order"]}, "status": "shipped"}}')
            tx.end_conversation(orders[0].conversation_handle)
        console.rule("3. the shop reads the replies and the EndDialog, and ends its side")
        with b.transaction() as tx:
            for msg in tx.receive("ShopQueue"):
                console.print(f"  received {msg.message_type_name.rsplit('/', 1)[-1]}: "
                              f"{msg.text() or '(empty)'}")
            tx.end_conversation(handle)
        _show(b, console)
        console.print("Both sides ended: the endpoints are gone, nothing accumulates.")


def _show(b: Broker, console: Console) -> None:
    print_views(b, ["conversation_endpoints", "transmission_queue"], console, columns={
        "conversation_endpoints": ["conversation_handle", "is_initiator", "service_name",
                                   "far_service", "state", "priority", "send_sequence"],
    })
    for queue in ("WarehouseQueue", "ShopQueue"):
        console.print(f"  {queue}: {len(b.peek(queue))} message(s) waiting")


@click.command()
@click.pass_context
@fail_cleanly
def demo(ctx: click.Context) -> None:
    """A dialog between two services, step by step, with the views printed."""
    run_demo(ctx.obj["db"], Console())


COMMANDS = [demo]
