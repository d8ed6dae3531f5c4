"""Durability and crash safety with real processes and ``kill -9``: what was committed is
there after reopen; a transaction killed half-way leaves no trace and its messages can be
received again; two processes receiving from one queue lose, duplicate and reorder nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.helpers import Child, begin_and_send, bodies, make_pair, table_counts

from sbroker import Broker
from sbroker.storage.sqlite import store as store_module


@pytest.fixture
def pair_file(db_path: Path) -> Path:
    """A broker file with the two services, closed again (children and reopen use it)."""
    with Broker.open(db_path) as b:
        make_pair(b, poison_message_handling=False)
        with b.db.connection() as conn:
            conn.execute("CREATE TABLE app_log (id INTEGER PRIMARY KEY, note TEXT NOT NULL)")
    return db_path


def test_everything_committed_survives_kill_9(
    pair_file: Path, spawn: Callable[..., Child],
) -> None:
    child = spawn("send-n", pair_file, 200)
    child.expect("done")
    child.kill9()
    with Broker.open(pair_file) as b:
        assert bodies(b.peek("TargetQueue")) == [str(i) for i in range(200)]


@pytest.mark.parametrize("durability", ["normal", "full"])
def test_kill_9_in_the_middle_of_a_stream_of_commits_keeps_every_acknowledged_one(
    pair_file: Path, spawn: Callable[..., Child], durability: str,
) -> None:
    child = spawn("send-n", pair_file, -1, durability=durability)
    acknowledged = -1
    while acknowledged < 150:
        acknowledged = child.expect("committed")
    child.kill9()
    acknowledged = max([acknowledged, *child.rest("committed")])
    with Broker.open(pair_file) as b:
        got = [int(x) for x in bodies(b.peek("TargetQueue"))]
    # Every acknowledged commit is there; at most the one in flight besides; no gaps.
    assert got == list(range(len(got)))
    assert acknowledged + 1 <= len(got) <= acknowledged + 2


def test_kill_9_never_leaves_half_a_transaction(
    pair_file: Path, spawn: Callable[..., Child],
) -> None:
    size = 500
    child = spawn("send-batches", pair_file, size)
    acknowledged = -1
    while acknowledged < 10:
        acknowledged = child.expect("committed")
    child.kill9()
    acknowledged = max([acknowledged, *child.rest("committed")])
    with Broker.open(pair_file) as b:
        got = bodies(b.peek("TargetQueue"))
    batches = len(got) // size
    assert len(got) % size == 0, f"{len(got)} messages: a transaction was torn"
    assert acknowledged + 1 <= batches <= acknowledged + 2
    assert got == [f"{i}:{k}" for i in range(batches) for k in range(size)]


def test_a_consumer_killed_at_a_random_moment_consumes_each_message_exactly_once(
    pair_file: Path, spawn: Callable[..., Child],
) -> None:
    conversations, per_conversation = 10, 100
    with Broker.open(pair_file) as b:
        handles = [begin_and_send(b) for _ in range(conversations)]
        with b.transaction() as tx:
            for k in range(per_conversation):
                for c, handle in enumerate(handles):
                    tx.send(handle, body=f"{c}:{k}")
    child = spawn("consume-forever", pair_file, 7)
    while child.expect("consumed") < 300:
        pass
    child.kill9()
    with Broker.open(pair_file) as b:
        logged = [r["note"] for r in sorted(b.view("app_log"), key=lambda r: r["id"])]
        remaining = bodies(b.peek("TargetQueue"))
    # Consumed (logged in the same transaction) or still queued: never both, never neither.
    assert sorted(logged + remaining) == sorted(
        f"{c}:{k}" for c in range(conversations) for k in range(per_conversation))
    for c in range(conversations):  # and each conversation reads in order across the crash
        seq = [int(x.split(":")[1]) for x in logged + remaining if x.split(":")[0] == str(c)]
        assert seq == list(range(per_conversation))


def test_a_receiver_killed_before_commit_leaves_its_messages_to_the_next_reader(
    pair_file: Path, spawn: Callable[..., Child],
) -> None:
    with Broker.open(pair_file) as b:
        begin_and_send(b, "m1", "m2")
        child = spawn("hold-receive", pair_file, "TargetQueue")
        assert [r["body"] for r in child.expect("received")] == ["m1", "m2"]
        with b.transaction() as tx:  # locked by the living child: not handed out
            assert tx.receive("TargetQueue") == []
        child.kill9()
        # The already-open broker reaps the dead session; a waiting RECEIVE picks it up.
        with b.transaction() as tx:
            assert bodies(tx.receive("TargetQueue", timeout=60)) == ["m1", "m2"]
        assert table_counts(b)["sb_group_locks"] == 0


def test_a_receive_that_finds_a_dead_process_s_lock_reaps_it_in_its_own_write(
    pair_file: Path, spawn: Callable[..., Child], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first attempt of a RECEIVE runs inside the writer's transaction; the dead
    session it finds is dropped in that transaction (asking the writer for another one from
    inside it would wait for itself)."""
    monkeypatch.setattr(store_module, "REAP_INTERVAL", 0.0)  # every look may reap
    with Broker.open(pair_file) as b:
        begin_and_send(b, "m1")
        child = spawn("hold-receive", pair_file, "TargetQueue")
        child.expect("received")
        with b.transaction() as tx:  # the child's lock is a row now, and it holds it
            assert tx.receive("TargetQueue") == []
        child.kill9()
        with b.transaction() as tx:  # no wait: the first, writing attempt must find it
            assert bodies(tx.receive("TargetQueue")) == ["m1"]
        assert table_counts(b)["sb_group_locks"] == 0


def test_a_receiver_killed_before_commit_is_reaped_when_the_file_is_reopened(
    pair_file: Path, spawn: Callable[..., Child],
) -> None:
    with Broker.open(pair_file) as b:
        begin_and_send(b, "m1")
    child = spawn("hold-receive", pair_file, "TargetQueue")
    child.expect("received")
    child.kill9()
    with Broker.open(pair_file) as b, b.transaction() as tx:
        assert bodies(tx.receive("TargetQueue")) == ["m1"]


def test_a_transaction_killed_while_holding_the_write_lock_leaves_no_trace(
    pair_file: Path, spawn: Callable[..., Child],
) -> None:
    with Broker.open(pair_file) as b:
        begin_and_send(b, "question")
        before = b.view("conversation_endpoints")
    child = spawn("hold-execute", pair_file)
    assert [r["body"] for r in child.expect("holding")] == ["question"]
    child.kill9()
    with Broker.open(pair_file) as b:
        assert b.view("app_log") == []  # the application INSERT is gone
        assert bodies(b.peek("InitQueue")) == []  # so is the reply
        assert b.view("conversation_endpoints") == before  # and no state moved
        with b.transaction() as tx:  # the file is writable and the message receivable
            got = tx.receive("TargetQueue")
            assert bodies(got) == ["question"]
            tx.execute("INSERT INTO app_log(note) VALUES ('parent')")
            tx.send(got[0].conversation_handle, body="answer")
        assert [r["note"] for r in b.view("app_log")] == ["parent"]
        assert bodies(b.peek("InitQueue")) == ["answer"]


@pytest.mark.slow
@pytest.mark.parametrize(("conversations", "per_conversation", "processes"),
                         [(50, 60, 2), (4, 250, 3)], ids=["50x60-2procs", "4x250-3procs"])
def test_receiving_processes_never_lose_duplicate_or_reorder_messages(
    pair_file: Path, tmp_path: Path, spawn: Callable[..., Child],
    conversations: int, per_conversation: int, processes: int,
) -> None:
    done_flag = tmp_path / "sending-done"
    outs = [tmp_path / f"worker-{i}.jsonl" for i in range(processes)]
    with Broker.open(pair_file) as b:
        handles = [begin_and_send(b) for _ in range(conversations)]

        def send_round(k: int) -> None:
            with b.transaction() as tx:
                for c, handle in enumerate(handles):
                    tx.send(handle, body=f"{c}:{k}")

        for k in range(per_conversation // 2):  # half before the workers start ...
            send_round(k)
        workers = [spawn("worker", pair_file, "TargetQueue", out, done_flag, seed)
                   for seed, out in enumerate(outs)]
        for w in workers:  # all of them start receiving at once
            w.expect("ready")
        for w in workers:
            w.tell("go")
        for k in range(per_conversation // 2, per_conversation):  # ... half while they run
            send_round(k)
        done_flag.touch()
        longest = []
        for w in workers:
            longest.append(w.expect("drained", timeout=240)["longest_receive"])
            assert w.finish() == 0
        assert b.peek("TargetQueue") == []
        assert table_counts(b)["sb_group_locks"] == 0

    batches = [json.loads(line) for out in outs for line in out.read_text().splitlines()]
    assert all(len({r["group"] for r in batch["rows"]}) == 1 for batch in batches)
    seen: dict[str, list[int]] = {}
    for batch in sorted(batches, key=lambda x: x["at"]):  # in the order RECEIVEs returned
        for row in batch["rows"]:
            c, k = row["body"].split(":")
            seen.setdefault(c, []).append(int(k))
    assert seen == {str(c): list(range(per_conversation)) for c in range(conversations)}
    shares = [sum(len(b["rows"]) for b in map(json.loads, o.read_text().splitlines()))
              for o in outs]
    print(f"messages received per process: {shares}; longest RECEIVE (timeout 0.2 s): "
          f"{', '.join(f'{x:.2f} s' for x in longest)}")
