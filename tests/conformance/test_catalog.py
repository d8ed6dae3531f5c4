"""DDL: every object can be created, dropped, and refuses duplicates and missing names."""

from __future__ import annotations

import pytest

import sbroker
from sbroker import (
    Activation,
    Broker,
    DatabaseError,
    DuplicateError,
    InvalidArgumentError,
    NotFoundError,
)


def test_builtin_objects_exist_in_every_database(broker: Broker) -> None:
    names = {r["name"] for r in broker.view("message_types")}
    assert {"DEFAULT", sbroker.END_DIALOG, sbroker.ERROR, sbroker.DIALOG_TIMER} <= names
    contracts = {r["name"] for r in broker.view("contracts")}
    assert "DEFAULT" in contracts
    assert "http://schemas.microsoft.com/SQL/Notifications/PostEventNotification" in contracts
    assert [r["name"] for r in broker.view("routes")] == ["AutoCreatedLocal"]


def test_broker_instance_is_stable_across_reopen(db_path) -> None:  # type: ignore[no-untyped-def]
    with Broker.open(db_path) as b:
        first = b.broker_instance
    with Broker.open(db_path) as b:
        assert b.broker_instance == first


@pytest.mark.parametrize(
    "create, drop",
    [
        (lambda b: b.create_message_type("M"), lambda b: b.drop_message_type("M")),
        (lambda b: b.create_contract("C", {"DEFAULT": "any"}), lambda b: b.drop_contract("C")),
        (lambda b: b.create_queue("Q2"), lambda b: b.drop_queue("Q2")),
        (lambda b: b.create_service("S2", "Q"), lambda b: b.drop_service("S2")),
        (lambda b: b.create_route("R", "S", "tcp://127.0.0.1:4022"), lambda b: b.drop_route("R")),
        (lambda b: b.create_broker_priority("P", priority_level=7),
         lambda b: b.drop_broker_priority("P")),
        (lambda b: b.create_event_notification("E", "Q", "QUEUE_ACTIVATION", "S"),
         lambda b: b.drop_event_notification("E")),
    ],
)
def test_create_duplicate_drop_missing(broker: Broker, create, drop) -> None:  # type: ignore[no-untyped-def]
    broker.create_queue("Q")
    create(broker)
    with pytest.raises(DuplicateError) as dup:
        create(broker)
    assert "already exists" in str(dup.value)
    drop(broker)
    with pytest.raises(NotFoundError) as missing:
        drop(broker)
    assert "does not exist" in str(missing.value)


def test_names_are_case_sensitive(broker: Broker) -> None:
    broker.create_queue("orders")
    broker.create_queue("Orders")
    assert {"orders", "Orders"} <= {r["name"] for r in broker.view("service_queues")}


def test_contract_needs_an_initiator_message_type(broker: Broker) -> None:
    broker.create_message_type("Reply")
    with pytest.raises(InvalidArgumentError, match="initiator"):
        broker.create_contract("OnlyReplies", {"Reply": "target"})
    with pytest.raises(NotFoundError, match="NoSuchType"):
        broker.create_contract("C", {"NoSuchType": "any"})
    with pytest.raises(InvalidArgumentError, match="sent_by"):
        broker.create_contract("C", {"Reply": "both"})


def test_in_use_objects_cannot_be_dropped(broker: Broker) -> None:
    broker.create_message_type("M")
    broker.create_contract("C", {"M": "any"})
    broker.create_queue("Q")
    broker.create_service("S", "Q", ["C"])
    with pytest.raises(InvalidArgumentError, match="contract"):
        broker.drop_message_type("M")
    with pytest.raises(InvalidArgumentError, match="service"):
        broker.drop_contract("C")
    with pytest.raises(InvalidArgumentError, match="service"):
        broker.drop_queue("Q")
    with pytest.raises(InvalidArgumentError, match="built in"):
        broker.drop_contract("DEFAULT")


def test_queue_options_are_stored_and_altered(broker: Broker) -> None:
    broker.create_queue(
        "Q", retention=True, poison_message_handling=False,
        activation=Activation("mypkg.worker:run", max_queue_readers=3),
    )
    row = next(r for r in broker.view("service_queues") if r["name"] == "Q")
    assert (row["is_retention_enabled"], row["is_poison_message_handling_enabled"]) == (1, 0)
    assert (row["activation_procedure"], row["max_queue_readers"]) == ("mypkg.worker:run", 3)
    broker.alter_queue("Q", status=False, activation=None)
    row = next(r for r in broker.view("service_queues") if r["name"] == "Q")
    assert (row["is_receive_enabled"], row["activation_procedure"]) == (0, None)
    with pytest.raises(InvalidArgumentError, match="unknown queue option"):
        broker.alter_queue("Q", colour="red")


@pytest.mark.parametrize("bad", ["", None, 3])
def test_bad_names_are_refused(broker: Broker, bad: object) -> None:
    with pytest.raises(InvalidArgumentError):
        broker.create_queue(bad)  # type: ignore[arg-type]


def test_bad_route_and_priority_values_are_refused(broker: Broker) -> None:
    with pytest.raises(InvalidArgumentError, match="tcp://"):
        broker.create_route("R", "S", "http://example")
    with pytest.raises(InvalidArgumentError, match="priority_level"):
        broker.create_broker_priority("P", priority_level=11)
    with pytest.raises(InvalidArgumentError, match="event"):
        broker.create_queue("Q") or broker.create_event_notification("E", "Q", "NOPE", "S")


def test_ddl_from_another_broker_object_is_seen(db_path) -> None:  # type: ignore[no-untyped-def]
    with Broker.open(db_path) as a, Broker.open(db_path) as b:
        assert "Q" not in b.catalog.queues
        a.create_queue("Q")
        assert "Q" in b.catalog.queues


def test_unknown_open_option_and_backend_are_clear_errors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidArgumentError, match="durabilty"):
        Broker.open(tmp_path / "x.db", durabilty="full")
    with pytest.raises(DatabaseError, match=r"cannot reach PostgreSQL at 127.0.0.1:1 \(conn"):
        Broker.open("postgresql://127.0.0.1:1/db")
    with pytest.raises(InvalidArgumentError, match="durability"):
        Broker.open(tmp_path / "y.db", durability="maybe")
