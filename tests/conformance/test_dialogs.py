"""Dialogs between two services of one database (docs/concepts.md)."""

from __future__ import annotations

import pytest

import sbroker
from sbroker import Broker


def begin_and_send(b: Broker, *bodies: str, contract: str = "DEFAULT",
                   mtype: str = "DEFAULT") -> str:
    with b.transaction() as tx:
        h = tx.begin_dialog("InitService", "TargetService", contract)
        for body in bodies:
            tx.send(h, mtype, body)
    return h


def test_begin_dialog_creates_only_the_initiator_endpoint(pair: Broker) -> None:
    with pair.transaction() as tx:
        h = tx.begin_dialog("InitService", "TargetService")
    rows = pair.view("conversation_endpoints")
    assert [(r["conversation_handle"], r["state"], r["is_initiator"]) for r in rows] == [
        (h, "SO", 1)]


def test_first_message_creates_the_target_endpoint_and_arrives(pair: Broker) -> None:
    h = begin_and_send(pair, "hello")
    states = {r["is_initiator"]: r["state"] for r in pair.view("conversation_endpoints")}
    assert states == {1: "CO", 0: "CO"}
    with pair.transaction() as tx:
        [msg] = tx.receive("TargetQueue")
    assert msg.text() == "hello"
    assert msg.message_sequence_number == 0
    assert msg.service_name == "TargetService"
    assert msg.service_contract_name == "DEFAULT"
    assert msg.conversation_handle != h
    assert msg.status == 1 and msg.priority == 5 and msg.validation == "N"


def test_messages_of_a_conversation_arrive_once_and_in_order(pair: Broker) -> None:
    begin_and_send(pair, *[f"m{i}" for i in range(20)])
    got = []
    while True:
        with pair.transaction() as tx:
            batch = tx.receive("TargetQueue", top=3)
        if not batch:
            break
        got += [m.text() for m in batch]
    assert got == [f"m{i}" for i in range(20)]


def test_body_types(pair: Broker) -> None:
    with pair.transaction() as tx:
        h = tx.begin_dialog("InitService", "TargetService")
        tx.send(h, body=b"\x00\x01")
        tx.send(h, body="é")
        with pytest.raises(sbroker.InvalidArgumentError, match="None"):
            tx.send(h, body=None)  # type: ignore[arg-type]
        with pytest.raises(sbroker.InvalidArgumentError, match="bytes or str"):
            tx.send(h, body=3)  # type: ignore[arg-type]
    with pair.transaction() as tx:
        assert [m.message_body for m in tx.receive("TargetQueue")] == [b"\x00\x01", "é".encode()]


def test_send_error_numbers(pair: Broker) -> None:
    pair.create_message_type("Ask")
    pair.create_message_type("Answer")
    pair.create_contract("QA", {"Ask": "initiator", "Answer": "target"})
    with pair.transaction() as tx:
        with pytest.raises(sbroker.ConversationNotFoundError) as e:
            tx.send("6F9619FF-8B86-D011-B42D-00C04FC964FF", body="x")
        assert e.value.number == 8426
        h = tx.begin_dialog("InitService", "TargetService", "QA")
        with pytest.raises(sbroker.ContractViolationError) as e:
            tx.send(h, "DEFAULT", "x")
        assert e.value.number == 8431
        with pytest.raises(sbroker.ContractViolationError) as e:
            tx.send(h, "Answer", "x")
        assert e.value.number == 8432
        tx.end_conversation(h)
        with pytest.raises(sbroker.ConversationStateError) as e:
            tx.send(h, "Ask", "x")
        assert e.value.number == 8429


def test_target_sending_an_initiator_type_is_8434(pair: Broker) -> None:
    pair.create_message_type("Ask")
    pair.create_contract("QA", {"Ask": "initiator"})
    pair.create_service("QAService", "TargetQueue", ["QA"])
    with pair.transaction() as tx:
        h = tx.begin_dialog("InitService", "QAService", "QA")
        tx.send(h, "Ask", "x")
    with pair.transaction() as tx:
        [msg] = tx.receive("TargetQueue")
        with pytest.raises(sbroker.ContractViolationError) as e:
            tx.send(msg.conversation_handle, "Ask", "back")
        assert e.value.number == 8434


def test_send_on_several_handles_is_atomic(pair: Broker) -> None:
    pair.create_message_type("Ask")
    pair.create_contract("QA", {"Ask": "initiator"})
    with pair.transaction() as tx:
        ok = tx.begin_dialog("InitService", "TargetService")
        qa = tx.begin_dialog("InitService", "TargetService", "QA")
        with pytest.raises(sbroker.ContractViolationError):
            tx.send([ok, qa], "DEFAULT", "x")  # qa's contract refuses DEFAULT: none is sent
        tx.send([ok, ok], "DEFAULT", "twice")
    with pair.transaction() as tx:
        assert [m.text() for m in tx.receive("TargetQueue")] == ["twice", "twice"]


def test_validation_failure_gives_the_sender_an_error_and_enqueues_nothing(pair: Broker) -> None:
    pair.create_message_type("Order", "well_formed_json")
    pair.create_contract("Orders", {"Order": "initiator"})
    pair.create_service("OrderService", "TargetQueue", ["Orders"])
    with pair.transaction() as tx:
        h = tx.begin_dialog("InitService", "OrderService", "Orders")
        tx.send(h, "Order", "{not json")
    assert pair.peek("TargetQueue") == []
    with pair.transaction() as tx:
        [err] = tx.receive("InitQueue")
    assert err.message_type_name == sbroker.ERROR
    code, text = err.error()
    assert code == -9615 and "JSON" in text


def test_target_that_does_not_accept_the_contract_errors_8408(pair: Broker) -> None:
    pair.create_message_type("M")
    pair.create_contract("Other", {"M": "any"})
    h = begin_and_send(pair, "x", contract="Other", mtype="M")
    with pair.transaction() as tx:
        [err] = tx.receive("InitQueue")
    assert err.conversation_handle == h and err.error()[0] == -8408
    states = [r["state"] for r in pair.view("conversation_endpoints")]
    assert states == ["ER"]


def test_unknown_target_service_waits_in_the_transmission_queue(pair: Broker) -> None:
    with pair.transaction() as tx:
        h = tx.begin_dialog("InitService", "NobodyHome")
        tx.send(h, body="anyone?")
    [row] = pair.view("transmission_queue")
    assert row["conversation_handle"] == h
    assert "could not be found" in row["transmission_status"]
    pair.create_service("NobodyHome", "TargetQueue", ["DEFAULT"])
    assert pair.view("transmission_queue") == []
    with pair.transaction() as tx:
        assert [m.text() for m in tx.receive("TargetQueue")] == ["anyone?"]


def test_plain_end_reaches_the_peer_after_pending_messages_and_cleans_up(pair: Broker) -> None:
    with pair.transaction() as tx:
        h = tx.begin_dialog("InitService", "TargetService")
        tx.send(h, body="last words")
        tx.end_conversation(h)
    with pair.transaction() as tx:
        msgs = tx.receive("TargetQueue")
        assert [m.message_type_name for m in msgs] == ["DEFAULT", sbroker.END_DIALOG]
        target = msgs[0].conversation_handle
    assert {r["state"] for r in pair.view("conversation_endpoints")} == {"DO", "DI"}
    with pair.transaction() as tx:
        tx.end_conversation(target)
    assert pair.view("conversation_endpoints") == []
    assert pair.peek("InitQueue") == [] and pair.peek("TargetQueue") == []


def test_end_with_error_drops_pending_and_sends_the_error(pair: Broker) -> None:
    h = begin_and_send(pair, "one")
    with pair.transaction() as tx:
        [msg] = tx.receive("TargetQueue")
        tx.end_conversation(msg.conversation_handle, error=4242, description="cannot do <that>")
    with pair.transaction() as tx:
        [err] = tx.receive("InitQueue")
        assert err.error() == (4242, "cannot do <that>")
        assert err.message_body.startswith(
            b'<Error xmlns="http://schemas.microsoft.com/SQL/ServiceBroker/Error"><Code>4242')
        tx.end_conversation(h)
    assert pair.view("conversation_endpoints") == []


def test_end_with_cleanup_removes_only_the_local_endpoint(pair: Broker) -> None:
    h = begin_and_send(pair, "x")
    with pair.transaction() as tx:
        tx.end_conversation(h, cleanup=True)
        with pytest.raises(sbroker.ConversationNotFoundError):
            tx.send(h, body="again")
    rows = pair.view("conversation_endpoints")
    assert [r["is_initiator"] for r in rows] == [0]
    assert len(pair.peek("TargetQueue")) == 1


def test_end_deletes_messages_still_queued_for_the_conversation(pair: Broker) -> None:
    begin_and_send(pair, "a", "b")
    with pair.transaction() as tx:
        [target] = {m.conversation_handle for m in tx.receive("TargetQueue", top=1)}
        tx.end_conversation(target)
    assert pair.peek("TargetQueue") == []


@pytest.mark.parametrize("kwargs, match", [
    ({"error": 0, "description": "x"}, "positive"),
    ({"error": -5, "description": "x"}, "positive"),
    ({"description": "x"}, "both"),
    ({"error": 1, "cleanup": True}, "cleanup"),
])
def test_end_conversation_argument_errors(pair: Broker, kwargs, match) -> None:  # type: ignore[no-untyped-def]
    with pair.transaction() as tx:
        h = tx.begin_dialog("InitService", "TargetService")
        with pytest.raises(sbroker.InvalidArgumentError, match=match):
            tx.end_conversation(h, **kwargs)


def test_begin_dialog_argument_errors(pair: Broker) -> None:
    with pair.transaction() as tx:
        with pytest.raises(sbroker.NotFoundError, match="NoService"):
            tx.begin_dialog("NoService", "TargetService")
        with pytest.raises(sbroker.NotFoundError, match="NoContract"):
            tx.begin_dialog("InitService", "TargetService", "NoContract")
        with pytest.raises(sbroker.InvalidArgumentError, match="lifetime"):
            tx.begin_dialog("InitService", "TargetService", lifetime=0)
        with pytest.raises(sbroker.ConversationNotFoundError):
            tx.begin_dialog("InitService", "TargetService", related_conversation="nope")


def test_related_conversations_share_a_group(pair: Broker) -> None:
    with pair.transaction() as tx:
        a = tx.begin_dialog("InitService", "TargetService")
        b = tx.begin_dialog("InitService", "TargetService", related_conversation=a)
        c = tx.begin_dialog("InitService", "TargetService",
                            related_conversation_group="11111111-2222-3333-4444-555555555555")
    groups = {r["conversation_handle"]: r["conversation_group_id"]
              for r in pair.view("conversation_endpoints")}
    assert groups[a] == groups[b] != groups[c]
    assert groups[c] == "11111111-2222-3333-4444-555555555555"


def test_statements_after_commit_are_refused(pair: Broker) -> None:
    tx = pair.transaction()
    with tx:
        tx.begin_dialog("InitService", "TargetService")
    with pytest.raises(sbroker.TransactionStateError):
        tx.begin_dialog("InitService", "TargetService")


def test_exception_rolls_back_everything(pair: Broker) -> None:
    with pytest.raises(RuntimeError), pair.transaction() as tx:
        h = tx.begin_dialog("InitService", "TargetService")
        tx.send(h, body="never")
        raise RuntimeError("boom")
    assert pair.view("conversation_endpoints") == [] and pair.peek("TargetQueue") == []


def test_retention_keeps_sent_and_received_messages(pair: Broker) -> None:
    pair.alter_queue("InitQueue", retention=True)
    pair.alter_queue("TargetQueue", retention=True)
    h = begin_and_send(pair, "kept")
    assert [m.status for m in pair.peek("InitQueue")] == [3]
    with pair.transaction() as tx:
        [msg] = tx.receive("TargetQueue")
    assert [m.status for m in pair.peek("TargetQueue")] == [0]
    with pair.transaction() as tx:
        assert tx.receive("TargetQueue") == []
        tx.end_conversation(h)
    assert pair.peek("InitQueue") == []
    assert msg.text() == "kept"


def test_application_statements_commit_and_roll_back_with_the_broker(pair: Broker) -> None:
    with pair.transaction() as tx:
        tx.execute("CREATE TABLE audit (note TEXT)")
    with pytest.raises(KeyError), pair.transaction() as tx:
        h = tx.begin_dialog("InitService", "TargetService")
        tx.send(h, body="x")
        tx.execute("INSERT INTO audit VALUES ('rolled back')")
        raise KeyError
    with pair.transaction() as tx:
        h = tx.begin_dialog("InitService", "TargetService")
        tx.send(h, body="x")
        tx.execute("INSERT INTO audit VALUES (?)", ("kept",))
        assert tx.execute("SELECT count(*) FROM audit").fetchone() == (1,)
    assert pair.view("audit") == [{"note": "kept"}]
    assert len(pair.peek("TargetQueue")) == 1


def test_send_after_end_on_a_conversation_of_an_earlier_transaction(pair: Broker) -> None:
    """SEND checks this transaction's own view of an endpoint it only knew from a snapshot."""
    with pair.transaction() as tx:
        a, b = (tx.begin_dialog("InitService", "TargetService") for _ in range(2))
        tx.send([a, b], body="first")
    with pair.transaction() as tx:
        tx.send(a.lower(), body="ok")
        tx.end_conversation(a)
        with pytest.raises(sbroker.ConversationStateError) as e:
            tx.send(a, body="after end")
        assert e.value.number == 8429
        with pytest.raises(sbroker.ConversationStateError) as e:
            tx.send([b, a], body="after end")  # all or none: b is not sent either
        assert e.value.number == 8429
        tx.end_conversation(b, cleanup=True)
        for handle in (b, b.lower(), [b]):
            with pytest.raises(sbroker.ConversationNotFoundError) as e:
                tx.send(handle, body="after cleanup")
            assert e.value.number == 8426
    kinds = [m.message_type_name for m in pair.peek("TargetQueue")]
    texts = [m.text() for m in pair.peek("TargetQueue") if not m.is_end_dialog]
    assert (texts, kinds.count(sbroker.END_DIALOG)) == (["first", "first", "ok"], 1)


def test_commit_checks_sends_again_after_ddl_since_the_statement(pair: Broker) -> None:
    pair.create_message_type("M")
    pair.create_message_type("N")
    pair.create_contract("C", {"M": "any"})
    with pair.transaction() as tx:
        h = tx.begin_dialog("InitService", "TargetService", "C")
    tx = pair.transaction()
    tx.send(h, "M", b"x")
    pair.drop_contract("C")
    pair.create_contract("C", {"N": "any"})
    with pytest.raises(sbroker.ContractViolationError) as e:
        tx.commit()
    assert e.value.number == 8431 and "no longer" in str(e.value)
    assert pair.view("transmission_queue") == []
