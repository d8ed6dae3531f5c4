"""Seed 000's CREATE BROKER PRIORITY scripts with a request/reply, and seed 004's poison
detection under the five-rollback rule, run through ``sbroker sql`` as a user runs them."""

from __future__ import annotations

from typing import Any

from support.tsql_cli import SCRIPTS, SqlRunner


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(result["columns"], row, strict=True)) for row in result["rows"]]


def test_seed_000_priorities_and_a_request_reply(sql: SqlRunner) -> None:
    sql.json(str(SCRIPTS / "seed000_setup.sql"), str(SCRIPTS / "seed000_priorities.sql"))
    [priorities] = sql.json("-Q", "select name, local_service_name, priority"
                                  " from sys.conversation_priorities order by name")
    assert rows(priorities) == [
        {"name": "InitiatorToTargetPriority", "local_service_name": "InitiatorSerivce",
         "priority": 3},
        {"name": "TargetToInitiatorPriority", "local_service_name": "TargetService",
         "priority": 3}]
    endpoints, request, reply = sql.json(str(SCRIPTS / "seed000_request_reply.sql"))
    assert rows(request) == [{"request": "<RequestMsg>Message for Target service.</RequestMsg>"}]
    assert rows(reply) == [{"reply": "<ReplyMsg>Message for Initiator service.</ReplyMsg>"}]
    # the target's endpoint matches TargetToInitiatorPriority; the initiator's keeps the
    # default 5, because the seed's initiator priority names "InitiatorSerivce"
    assert rows(endpoints) == [
        {"service_name": "InitiatorService", "far_service": "TargetService", "priority": 5},
        {"service_name": "TargetService", "far_service": "InitiatorService", "priority": 3}]


SEND = """
declare @h uniqueidentifier
begin dialog @h from service SenderService to service 'WorkService' on contract WorkContract
send on conversation @h message type Work (N'{body}')
"""
STATE = """
select (select count(*) from dbo.poison_message_details) as incidents,
       (select count(*) from dbo.dead_letters) as dead,
       (select count(*) from dbo.processed) as processed,
       (select is_receive_enabled from sys.service_queues where name = 'WorkQueue') as enabled
"""


def test_seed_004_takes_a_poison_message_out_before_the_fifth_rollback(sql: SqlRunner) -> None:
    sql.json(str(SCRIPTS / "seed004_poison.sql"))
    sql.json("-Q", SEND.format(body="poison"))
    # four rollbacks record four incidents; the fifth call finds more than three and takes
    # the message out (commit): the queue never sees a fifth rollback
    [state] = sql.json("-Q", "exec dbo.process_queue\n" * 5 + STATE)
    assert rows(state) == [{"incidents": 4, "dead": 1, "processed": 0, "enabled": 1}]
    sql.json("-Q", SEND.format(body="fine"))
    [state] = sql.json("-Q", "exec dbo.process_queue" + STATE)
    assert rows(state) == [{"incidents": 4, "dead": 1, "processed": 1, "enabled": 1}]


def test_seed_004_with_a_high_threshold_meets_the_five_rollback_rule(sql: SqlRunner) -> None:
    sql.json(str(SCRIPTS / "seed004_poison.sql"))
    sql.json("-Q", SEND.format(body="poison"))
    [state] = sql.json("-Q", "exec dbo.process_queue @threshold = 10\n" * 5 + STATE)
    assert rows(state) == [{"incidents": 5, "dead": 0, "processed": 0, "enabled": 0}]
