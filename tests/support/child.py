"""A second process on the same broker file, for the engine tier's multi-process tests.

Usage: ``python child.py COMMAND DB [ARGS...]``.  It reports on stdout as ``word <json>`` lines
and takes orders on stdin, so the parent test can follow it without sleeping.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from typing import Any

import sbroker


def say(word: str, payload: Any = None) -> None:
    print(word if payload is None else f"{word} {json.dumps(payload)}", flush=True)


def order() -> str:
    """The parent's next line on stdin ('' when it closed stdin)."""
    return sys.stdin.readline().strip()


def rows(messages: list[sbroker.Message]) -> list[dict[str, Any]]:
    return [
        {"handle": m.conversation_handle, "group": m.conversation_group_id,
         "msn": m.message_sequence_number, "body": m.text(), "type": m.message_type_name}
        for m in messages
    ]


def send_n(b: sbroker.Broker, n: int) -> None:
    """Begin one dialog and send ``n`` messages (forever if n < 0), one per transaction,
    saying ``committed i`` after each commit; then wait to be killed."""
    handle = None
    i = 0
    while n < 0 or i < n:
        with b.transaction() as tx:
            if handle is None:
                handle = tx.begin_dialog("InitService", "TargetService")
            tx.send(handle, body=str(i))
        say("committed", i)
        i += 1
    say("done")
    order()


def send_batches(b: sbroker.Broker, size: int) -> None:
    """Forever: one transaction of ``size`` messages on one dialog; ``committed i`` after
    each commit."""
    handle = None
    i = 0
    while True:
        with b.transaction() as tx:
            if handle is None:
                handle = tx.begin_dialog("InitService", "TargetService")
            for k in range(size):
                tx.send(handle, body=f"{i}:{k}")
        say("committed", i)
        i += 1


def hold_receive(b: sbroker.Broker, queue: str, top: str = "") -> None:
    """RECEIVE, report, then commit or roll back on order (or be killed meanwhile)."""
    tx = b.transaction()
    messages = tx.receive(queue, top=int(top) if top else None)
    say("received", rows(messages))
    if order() == "commit":
        tx.commit()
    else:
        tx.rollback()
    say("finished")


def hold_execute(b: sbroker.Broker) -> None:
    """RECEIVE, an application INSERT (which holds the SQLite write lock), a reply SEND:
    report, then wait to be killed."""
    tx = b.transaction()
    messages = tx.receive("TargetQueue")
    tx.execute("INSERT INTO app_log(note) VALUES (?)", ("written by the child",))
    tx.send(messages[0].conversation_handle, body="reply from the child")
    say("holding", rows(messages))
    order()


def send_on(b: sbroker.Broker, handle: str, body: str) -> None:
    """Send ``body`` on ``handle`` when told to 'go'; report the monotonic commit time."""
    say("ready")
    if order() != "go":
        return
    with b.transaction() as tx:
        tx.send(handle, body=body)
    say("committed", time.monotonic())


def wait_receive(b: sbroker.Broker, queue: str, timeout: str) -> None:
    """A waiting RECEIVE; says ``parked`` once it waits, then reports the rows and the
    monotonic time it returned."""
    original = b.hooks.waiting

    def spy(qid: int, delta: int) -> None:
        original(qid, delta)
        if delta > 0:
            say("parked")

    b.hooks.waiting = spy  # type: ignore[method-assign]
    with b.transaction() as tx:
        messages = tx.receive(queue, timeout=float(timeout))
        returned = time.monotonic()
    say("received", {"rows": rows(messages), "at": returned})


def worker(b: sbroker.Broker, queue: str, out: str, done_flag: str, seed: str) -> None:
    """Receive until the sender is done and the queue is empty; roll back now and then.
    After each COMMIT append one JSON line: when RECEIVE returned, and what it returned."""
    rng = random.Random(int(seed))
    longest = 0.0
    say("ready")
    if order() != "go":
        return
    with open(out, "a", encoding="utf-8") as f:
        while True:
            with b.transaction() as tx:
                called = time.monotonic()
                messages = tx.receive(queue, top=rng.choice([1, 1, 3, 10, None]), timeout=0.2)
                returned = time.monotonic()
                longest = max(longest, returned - called)
                if messages and rng.random() < 0.1:
                    tx.rollback()
                    continue
            if messages:
                f.write(json.dumps({"at": returned, "rows": rows(messages)}) + "\n")
                f.flush()
            elif os.path.exists(done_flag) and not b.peek(queue):
                break
    say("drained", {"longest_receive": longest})


def consume_forever(b: sbroker.Broker, seed: str) -> None:
    """RECEIVE and log each message in app_log in the same transaction, forever (until
    killed); says ``consumed n`` after each commit."""
    rng = random.Random(int(seed))
    total = 0
    while True:
        with b.transaction() as tx:
            messages = tx.receive("TargetQueue", top=rng.choice([1, 2, 5]), timeout=1)
            for msg in messages:
                tx.execute("INSERT INTO app_log(note) VALUES (?)", (msg.text(),))
        total += len(messages)
        say("consumed", total)


def set_timer(b: sbroker.Broker, seconds: str) -> None:
    """Begin a dialog and set a conversation timer on it (this broker is not started)."""
    with b.transaction() as tx:
        handle = tx.begin_dialog("InitService", "TargetService")
        tx.send(handle, body="hello")
        tx.begin_conversation_timer(handle, float(seconds))
    say("committed", handle)


def close_while_waiting(b: sbroker.Broker) -> None:
    """Close the broker while another thread waits in RECEIVE; report how the wait ended."""
    queue_id = b.catalog.queue("TargetQueue").queue_id
    parked = threading.Event()
    original = b.hooks.waiting

    def spy(qid: int, delta: int) -> None:
        original(qid, delta)
        if qid == queue_id and delta > 0:
            parked.set()

    b.hooks.waiting = spy  # type: ignore[method-assign]
    outcome: dict[str, Any] = {}

    def wait() -> None:
        try:
            with b.transaction() as tx:
                outcome["returned"] = rows(tx.receive("TargetQueue", timeout=None))
        except BaseException as exc:
            outcome["error"] = type(exc).__name__
            outcome["broker_error"] = isinstance(exc, sbroker.BrokerError)
            outcome["message"] = str(exc)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    if not parked.wait(60):
        say("never-waited")
        return
    b.close()
    waiter.join(60)
    outcome["waiter_finished"] = not waiter.is_alive()
    say("outcome", outcome)


def activate_hold(b: sbroker.Broker, queue: str) -> None:
    """Start the broker with an activated procedure on ``queue`` that holds until killed;
    send it a message; say ``running`` once the procedure runs and its rows are published."""
    running = threading.Event()

    def procedure(ctx: sbroker.ActivationContext) -> None:
        running.set()
        ctx.stopping.wait()

    b.alter_queue(queue, activation=sbroker.Activation(procedure, max_queue_readers=1))
    b.start()
    with b.transaction() as tx:
        tx.send(tx.begin_dialog("InitService", "TargetService"), body="work")
    if not running.wait(60):
        say("never-ran")
        return
    b.view("dm_broker_queue_monitors")  # publishes this process's monitor rows now
    say("running", {"pid": os.getpid()})
    order()


def start_broker(b: sbroker.Broker) -> None:
    """Start the broker's services (timers, lifetimes, activation); say ``started``; run
    until told to stop."""
    b.start()
    say("started", {"pid": os.getpid(), "session": b.session_id})
    order()


def executor(b: sbroker.Broker, readers: str) -> None:
    """Install the scheduler's executor (Python tasks run without Spark), start the broker,
    say ``started``; run until told to stop."""
    from sbroker.apps.spark import StubRunner

    b.use_executor_runner(StubRunner())
    b.install_executor(max_queue_readers=int(readers))
    start_broker(b)


def barrier_task(spark: Any, folder: str, count: int) -> dict[str, Any]:
    """A scheduler task (run by ``executor`` children): note this process in ``folder``, then
    wait until ``count`` processes run one (a deadline of 60 s); which process ran it."""
    me = f"{os.getpid()}"
    open(os.path.join(folder, f"{me}-{threading.get_ident()}"), "w").close()
    deadline = time.monotonic() + 60
    while len({name.split("-")[0] for name in os.listdir(folder)}) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {os.listdir(folder)} started")
        time.sleep(0.01)
    return {"pid": os.getpid()}


COMMANDS = {
    "activate-hold": activate_hold,
    "start-broker": start_broker,
    "executor": executor,
    "close-while-waiting": close_while_waiting,
    "send-n": lambda b, n: send_n(b, int(n)),
    "send-batches": lambda b, size: send_batches(b, int(size)),
    "hold-receive": hold_receive,
    "hold-execute": hold_execute,
    "send-on": send_on,
    "set-timer": set_timer,
    "consume-forever": consume_forever,
    "wait-receive": wait_receive,
    "worker": worker,
}


def main() -> None:
    command, db, *args = sys.argv[1:]
    if "SBROKER_RECHECK" in os.environ:  # waiters' safety-net poll (engine/notify.py)
        from sbroker.engine import notify

        notify.RECHECK_SECONDS = float(os.environ["SBROKER_RECHECK"])
    b = sbroker.Broker.open(db, durability=os.environ.get("SBROKER_DURABILITY", "normal"),
                            monitor_interval=float(os.environ.get("SBROKER_MONITOR", "5")))
    if b.dialect == "sqlite":
        # Children mark every received row and sweep often, so that processes' marks and
        # sweeps interleave (consumed.py).
        b.db.sweeper.dense, b.db.sweeper.every_commits = 0, 3
    try:
        COMMANDS[command](b, *args)
    finally:
        b.close()


if __name__ == "__main__":
    main()
