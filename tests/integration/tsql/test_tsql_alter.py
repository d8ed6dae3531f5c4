"""ALTER MESSAGE TYPE and ALTER SERVICE in T-SQL on the engine's catalog API, and ALTER
CONTRACT refused as SQL Server refuses it (docs/tsql.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import sbroker
from sbroker.apps.tsql import TSqlError
from sbroker.core.errors import DuplicateError, InvalidArgumentError, NotFoundError

Run = Callable[..., list[list[dict[str, Any]]]]

SETUP = """
create message type Note validation = none
create contract Notes (Note sent by initiator)
create contract Other ([DEFAULT] sent by any)
create queue InitQueue
create queue TargetQueue
create queue SpareQueue
create service InitService on queue InitQueue
create service TargetService on queue TargetQueue (Notes)
"""

SEND_NOTE = """
declare @h uniqueidentifier, @type sysname
begin dialog @h from service InitService to service 'TargetService' on contract Notes
    with encryption = off
send on conversation @h message type Note (N'<unclosed')
"""


def test_alter_message_type_validates_what_is_sent_from_then_on(
        tsql: Run, broker: sbroker.Broker) -> None:
    tsql(SETUP + SEND_NOTE)
    assert len(broker.peek("TargetQueue")) == 1  # no validation: taken as it is
    tsql("alter message type Note validation = well_formed_xml")
    assert broker.catalog.message_types["Note"].kind == "well_formed_xml"
    [[error]] = tsql(SEND_NOTE + """
        receive top (1) @type = message_type_name from InitQueue
        select @type as type""")
    assert error["type"] == "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
    assert len(broker.peek("TargetQueue")) == 1  # the invalid one was not enqueued
    with pytest.raises(TSqlError, match="VALID_XML WITH SCHEMA COLLECTION"):
        tsql("alter message type Note validation = valid_xml with schema collection S")
    with pytest.raises(TSqlError, match="does not exist"):
        tsql("alter message type Missing validation = empty")


def test_alter_service_contracts_and_queue(tsql: Run, broker: sbroker.Broker) -> None:
    tsql(SETUP + "alter service TargetService (add contract Other, drop contract Notes)")
    assert broker.catalog.services["TargetService"].contracts == frozenset({"Other"})
    [[error]] = tsql(SEND_NOTE + """
        receive top (1) @type = message_type_name from InitQueue
        select @type as type""")  # Notes is no longer accepted by the target
    assert error["type"] == "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
    tsql("alter service TargetService on queue SpareQueue (add contract Notes)")
    assert broker.catalog.services["TargetService"].contracts == frozenset({"Notes", "Other"})
    tsql(SEND_NOTE)
    assert len(broker.peek("SpareQueue")) == 1 and not broker.peek("TargetQueue")
    with pytest.raises(TSqlError, match="has conversations: end them"):
        tsql("alter service TargetService on queue TargetQueue")
    with pytest.raises(TSqlError, match="has no contract 'Missing'"):
        tsql("alter service TargetService (drop contract Missing)")


def test_alter_contract_is_refused_with_the_way_to_change_one(tsql: Run) -> None:
    with pytest.raises(TSqlError, match="ALTER CONTRACT does not exist in SQL Server"):
        tsql("alter contract Notes (Note sent by any)")


def test_the_catalog_api_behind_them(broker: sbroker.Broker) -> None:
    broker.create_message_type("M")
    broker.create_contract("C", {"M": "any"})
    broker.create_queue("Q1")
    broker.create_queue("Q2")
    broker.create_service("S", "Q1")
    broker.alter_message_type("M", {"type": "object"})
    assert broker.catalog.message_types["M"].kind == "json_schema"
    broker.alter_service("S", queue="Q2", add_contracts=["C"])
    service = broker.catalog.services["S"]
    assert service.contracts == frozenset({"C"})
    assert broker.catalog.queues_by_id[service.queue_id].name == "Q2"
    with pytest.raises(DuplicateError, match="already has contract 'C'"):
        broker.alter_service("S", add_contracts=["C"])
    with pytest.raises(NotFoundError):
        broker.alter_service("S", queue="Missing")
    with pytest.raises(InvalidArgumentError, match="built in"):
        broker.alter_message_type("DEFAULT", "empty")


def test_alter_route_and_priority_change_only_what_they_name(
        tsql: Run, broker: sbroker.Broker) -> None:
    tsql(SETUP + """
        create route Far with service_name = 'FarService', address = 'TCP://10.0.0.1:4022'
        create broker priority P for conversation set (contract_name = Notes,
            local_service_name = InitService, priority_level = 2)
        alter route Far with address = 'TCP://10.0.0.2:4022'
        alter broker priority P for conversation set (priority_level = 8)
    """)
    [route] = [r for r in broker.catalog.routes if r.name == "Far"]
    assert (route.service_name, route.address) == ("FarService", "tcp://10.0.0.2:4022")
    [priority] = broker.catalog.priorities
    assert (priority.contract, priority.local_service, priority.priority_level) == (
        "Notes", "InitService", 8)
    with pytest.raises(TSqlError, match="Msg 15151.*route 'Near'"):
        tsql("alter route Near with address = 'LOCAL'")
