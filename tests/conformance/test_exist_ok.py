"""``create_*(exist_ok=True)``: the same definition again is a no-op (a script or a tour can
run twice); a different definition is a DuplicateError that says what differs."""

from __future__ import annotations

from typing import Any

import pytest

import sbroker


def procedure(ctx: Any) -> None:
    """An activation procedure that is never started (the broker is not)."""


def define(b: sbroker.Broker, *, exist_ok: bool = True) -> None:
    """Every kind of catalog object the README tours create."""
    b.create_message_type("Order", "well_formed_json", exist_ok=exist_ok)
    b.create_message_type("Shaped", {"type": "object"}, exist_ok=exist_ok)
    b.create_contract("OrderContract", {"Order": "initiator"}, exist_ok=exist_ok)
    b.create_queue("ShopQueue", exist_ok=exist_ok)
    b.create_queue("Busy", activation=sbroker.Activation(procedure, max_queue_readers=2),
                   exist_ok=exist_ok)
    b.create_service("Shop", "ShopQueue", exist_ok=exist_ok)
    b.create_service("Warehouse", "ShopQueue", ["OrderContract"], exist_ok=exist_ok)
    b.create_route("ToFar", "Far", "tcp://10.0.0.2:4022", exist_ok=exist_ok)
    b.create_broker_priority("Urgent", contract="OrderContract", priority_level=8,
                             exist_ok=exist_ok)
    b.create_event_notification("Watch", "ShopQueue", "BROKER_QUEUE_DISABLED", "Shop",
                                exist_ok=exist_ok)
    b.create_endpoint(port=0, secret="s3cret", encryption="supported", exist_ok=exist_ok)


def test_a_script_that_creates_its_objects_runs_twice(db_path: str) -> None:
    path = db_path
    with sbroker.Broker.open(path) as b:
        define(b)
        before = {name: b.view(name) for name in ("message_types", "contracts",
                                                  "service_queues", "services", "routes",
                                                  "conversation_priorities")}
    with sbroker.Broker.open(path) as b:
        define(b)  # the second run: nothing to do, nothing raised
        assert {name: b.view(name) for name in before} == before


def test_without_exist_ok_a_duplicate_is_still_an_error(db_path: str) -> None:
    with sbroker.Broker.open(db_path) as b:
        define(b, exist_ok=False)
        with pytest.raises(sbroker.DuplicateError, match="already exists"):
            b.create_queue("ShopQueue")
        with pytest.raises(sbroker.DuplicateError, match="already exists"):
            b.create_endpoint(port=0, secret="s3cret", encryption="supported")


@pytest.mark.parametrize(("create", "differs"), [
    (lambda b: b.create_message_type("Order", "none", exist_ok=True), "validation"),
    (lambda b: b.create_message_type("Shaped", {"type": "array"}, exist_ok=True), "schema"),
    (lambda b: b.create_contract("OrderContract", {"Order": "any"}, exist_ok=True),
     "message_types"),
    (lambda b: b.create_queue("ShopQueue", status=False, exist_ok=True), "status"),
    (lambda b: b.create_queue("Busy", activation=sbroker.Activation(
        procedure, max_queue_readers=3), exist_ok=True), "activation"),
    (lambda b: b.create_service("Shop", "ShopQueue", ["OrderContract"], exist_ok=True),
     "contracts"),
    (lambda b: b.create_route("ToFar", "Far", "tcp://10.0.0.3:4022", exist_ok=True),
     "address"),
    (lambda b: b.create_broker_priority("Urgent", contract="OrderContract",
                                        priority_level=9, exist_ok=True), "priority_level"),
    (lambda b: b.create_event_notification("Watch", "ShopQueue", "QUEUE_ACTIVATION", "Shop",
                                           exist_ok=True), "event"),
    (lambda b: b.create_endpoint(port=0, secret="other", encryption="supported",
                                 exist_ok=True), "secret"),
])
def test_a_different_definition_is_an_error_naming_what_differs(
        db_path: str, create: Any, differs: str) -> None:
    with sbroker.Broker.open(db_path) as b:
        define(b)
        with pytest.raises(sbroker.DuplicateError, match="different definition") as caught:
            create(b)
        message = str(caught.value)
        assert differs in message and "\n" not in message
        assert "s3cret" not in message and "'other'" not in message  # secrets stay secret
