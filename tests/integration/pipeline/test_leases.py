"""Runs that outlive their driver, on SQLite and PostgreSQL (docs/pipelines.md, "Running in
production"): one driver per run (its lease, judged by the database's clock), fencing of a
driver that lost it, takeover by a server, hand-back when a server stops, cancel from any
process, timeouts recorded at the deadline whether or not the task's code returns, and
``--from``.  Brokers in one process stand for processes (each has its own session); the
StubRunner runs ``pipeline_task_helpers`` for real (no JVM)."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import sbroker
from sbroker.apps.pipeline import (
    DurableRunner,
    LeaseHeld,
    Pipeline,
    PipelineError,
    PipelineService,
    RunListener,
    RunState,
    TaskState,
    cancel_run,
    get_run,
    parse_pipeline,
    resume_run,
    run_attempts,
    start_run,
    submit_run,
    wait_run,
)

DEADLINE = 60.0



def task(name: str, target: str, after: tuple[str, ...] = (), **options: object) -> str:
    lines = ["[[task]]", f'name = "{name}"', f'python = "pipeline_task_helpers:{target}"']
    if after:
        lines.append("after = [" + ", ".join(f'"{a}"' for a in after) + "]")
    args = options.pop("args", {})
    lines += [f"{k} = {v!r}".replace("'", '"') for k, v in options.items()]
    lines.append("args = {" + ", ".join(f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v}"
                                       for k, v in dict(args).items()) + "}")  # type: ignore[call-overload]
    return "\n".join(lines) + "\n"


def note(name: str, log: Path, after: tuple[str, ...] = ()) -> str:
    return task(name, "note", after, args={"path": str(log), "name": name})


def pipeline(*tasks: str, lease: str = "30s", name: str = "p") -> Pipeline:
    return parse_pipeline(f'[pipeline]\nname = "{name}"\n[options]\nlease = "{lease}"\n'
                          + "".join(tasks))


def until(check: Callable[[], object], what: str, deadline: float = DEADLINE) -> object:
    """Poll ``check`` (bounded) until it returns something true."""
    end = time.monotonic() + deadline
    tick = threading.Event()
    while not (got := check()):
        assert time.monotonic() < end, what
        tick.wait(0.02)
    return got


def in_thread(fn: Callable[[], RunState]) -> tuple[threading.Thread, list[RunState]]:
    out: list[RunState] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return thread, out


class _Pause(RunListener):
    """Holds the driver's thread (as SIGSTOP would) once the task ``at`` has started."""

    def __init__(self, at: str) -> None:
        self.at, self.paused, self.go = at, threading.Event(), threading.Event()

    def task_started(self, run: RunState, task: TaskState) -> None:
        if task.name == self.at and not self.paused.is_set():
            self.paused.set()
            assert self.go.wait(DEADLINE)


def succeeded_attempts(b: sbroker.Broker, run_id: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in run_attempts(b, run_id):
        if a["status"] == "succeeded":
            out[a["task"]] = out.get(a["task"], 0) + 1
    return out


def test_a_live_lease_refuses_a_resume_and_of_two_resumes_one_drives(
        hosts: list[sbroker.Broker], tmp_path: Path) -> None:
    release = tmp_path / "release"
    p = pipeline(task("a", "hang", args={"release": str(release)}))
    driving = DurableRunner(hosts[0], p).create()
    with pytest.raises(LeaseHeld) as held:  # a live driver holds it (this "process")
        DurableRunner(hosts[1], p).resume(driving.run_id)
    assert held.value.host and held.value.pid
    assert str(held.value).startswith(f"run {driving.run_id} is being driven by ")
    run = get_run(hosts[1], driving.run_id)
    assert run is not None and run["driver"] == {"host": held.value.host,
                                                 "pid": held.value.pid}
    DurableRunner(hosts[0], p).hand_back(driving)  # its lease ends: free to take
    got: list[object] = []

    def take(b: sbroker.Broker) -> None:
        try:
            got.append(DurableRunner(b, p).resume(driving.run_id))
        except LeaseHeld as exc:
            got.append(exc)

    threads = [threading.Thread(target=take, args=(b,)) for b in hosts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    assert sorted(type(g).__name__ for g in got) == ["LeaseHeld", "RunState"]


def test_a_driver_paused_past_its_lease_is_fenced_and_the_run_is_taken_over(
        hosts: list[sbroker.Broker], tmp_path: Path) -> None:
    log = tmp_path / "ran.txt"
    p = pipeline(note("a", log), note("b", log, ("a",)), note("c", log, ("b",)), lease="1s")
    pause = _Pause("a")
    first = DurableRunner(hosts[0], p, listener=pause)
    state = first.create()
    thread, out = in_thread(lambda: first.drive(state))
    pause.paused.wait(DEADLINE)
    # the lease runs out by the database's clock while the driver is held: another takes it
    taken = until(lambda: _try_take(hosts[1], p, state.run_id), "the lease never expired")
    assert isinstance(taken, RunState) and taken.takeover
    second = DurableRunner(hosts[1], p).drive(taken)
    assert second.status == "succeeded"
    pause.go.set()  # the first driver goes on: its next commit is fenced, it lets go
    thread.join(DEADLINE)
    assert out[0].lost and out[0].status == "running"
    assert log.read_text().split() == ["a", "b", "c"]  # each ran once
    assert succeeded_attempts(hosts[0], state.run_id) == {"a": 1, "b": 1, "c": 1}
    run = get_run(hosts[0], state.run_id)
    assert run is not None and run["status"] == "succeeded" and run["takeovers"] == 1
    assert run["driver"] is None


def _try_take(b: sbroker.Broker, p: Pipeline, run_id: int) -> RunState | None:
    try:
        return DurableRunner(b, p).resume(run_id, takeover=True)
    except LeaseHeld:
        return None


def test_a_server_takes_over_a_run_whose_driver_is_gone_and_hands_back_when_stopped(
        hosts: list[sbroker.Broker], database: str, tmp_path: Path) -> None:
    release, log = tmp_path / "release", tmp_path / "ran.txt"
    (tmp_path / "gone.toml").write_text(
        '[pipeline]\nname = "gone"\n' + task("a", "hang", args={"release": str(release)})
        + note("b", log, ("a",)))
    p = sbroker_load(tmp_path / "gone.toml")
    gone = sbroker.Broker.open(database)  # the driver: its process "dies" (session gone)
    run_id = DurableRunner(gone, p).create().run_id
    gone.close()
    first = PipelineService(hosts[0])
    first.start()
    try:
        until(lambda: first.driving == [run_id], "no server took the run over")
        until(lambda: any(a["status"] == "running" for a in run_attempts(hosts[0], run_id)),
              "the taken-over run never started its task")
    finally:
        first.stop()  # hands the run back at once
    run = get_run(hosts[1], run_id)
    assert run is not None and run["status"] == "running" and run["driver"] is None
    second = PipelineService(hosts[1])
    second.start()
    try:
        until(lambda: second.driving == [run_id], "the handed-back run was not taken")
        release.touch()
        assert wait_run(hosts[1], run_id, DEADLINE) == "succeeded"
    finally:
        second.stop()
    run = get_run(hosts[1], run_id)
    assert run is not None and run["takeovers"] == 2
    assert succeeded_attempts(hosts[1], run_id) == {"a": 1, "b": 1}


def sbroker_load(path: Path) -> Pipeline:
    from sbroker.apps.pipeline import load_pipeline

    return load_pipeline(path)


def test_cancel_from_another_process_stops_the_run_within_seconds(
        hosts: list[sbroker.Broker], tmp_path: Path) -> None:
    release, log = tmp_path / "release", tmp_path / "ran.txt"
    p = pipeline(task("a", "hang", args={"release": str(release)}), note("b", log),
                 note("c", log, ("a",)))
    runner = DurableRunner(hosts[0], p)
    state = runner.create()
    thread, out = in_thread(lambda: runner.drive(state))
    until(lambda: any(a["task"] == "a" and a["status"] == "running"
                      for a in run_attempts(hosts[1], state.run_id)), "a never started")
    until(lambda: log.exists(), "b never ran")
    asked = time.monotonic()
    said = cancel_run(hosts[1], state.run_id)
    assert said.startswith(f"run {state.run_id}: cancel asked of its driver ")
    thread.join(DEADLINE)
    assert time.monotonic() - asked < 5.0  # though a's code never returns
    assert out[0].status == "cancelled"
    run = get_run(hosts[1], state.run_id)
    assert run is not None and run["status"] == "cancelled"
    assert {t["name"]: t["status"] for t in run["tasks"]} == {
        "a": "cancelled", "b": "succeeded", "c": "pending"}
    with pytest.raises(PipelineError, match="is cancelled, not running: nothing to cancel"):
        cancel_run(hosts[1], state.run_id)
    with pytest.raises(PipelineError, match="there is no run 999"):
        cancel_run(hosts[1], 999)
    release.touch()
    resumed = resume_run(hosts[1], p, state.run_id)  # cancelled runs are resumable
    assert resumed.status == "succeeded" and resumed.tasks["b"].kept


def test_a_run_no_one_drives_is_cancelled_by_the_canceller(hosts: list[sbroker.Broker],
                                                           tmp_path: Path) -> None:
    run_id = submit_run(hosts[0], pipeline(note("a", tmp_path / "ran.txt")))
    assert cancel_run(hosts[1], run_id) == f"run {run_id} cancelled"
    assert wait_run(hosts[0], run_id, 0.0) == "cancelled"
    run = get_run(hosts[0], run_id)
    assert run is not None and [t["status"] for t in run["tasks"]] == ["pending"]


def test_wait_run_says_the_outcome_or_none_after_its_timeout(hosts: list[sbroker.Broker],
                                                             tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[pipeline]\nname = "p"\n' + note("a", tmp_path / "ran.txt"))
    run_id = submit_run(hosts[0], sbroker_load(path))
    assert wait_run(hosts[0], run_id, 0.05) is None  # no server: still running
    with pytest.raises(PipelineError, match="there is no run 999"):
        wait_run(hosts[0], 999, 0.05)
    server = PipelineService(hosts[1])
    server.start()
    try:
        assert wait_run(hosts[0], run_id, DEADLINE) == "succeeded"
    finally:
        server.stop()


def test_a_timeout_ends_the_attempt_at_its_deadline_though_its_code_never_returns(
        hosts: list[sbroker.Broker], tmp_path: Path) -> None:
    release, log = tmp_path / "release", tmp_path / "ran.txt"
    p = pipeline(task("slow", "hang", timeout="300ms", args={"release": str(release)}),
                 note("after", log, ("slow",)), note("other", log))
    state = start_run(hosts[0], p)
    slow = state.tasks["slow"]
    assert slow.start_time is not None and slow.end_time is not None
    took = (dt.datetime.fromisoformat(slow.end_time)
            - dt.datetime.fromisoformat(slow.start_time)).total_seconds()
    assert state.status == "failed" and took < 0.3 + 2.0, took  # sent, then its deadline
    assert {n: t.status for n, t in state.tasks.items()} == {
        "slow": "failed", "after": "skipped", "other": "succeeded"}
    assert state.tasks["slow"].error == "timed out after 0.3 s"
    [attempt] = [a for a in run_attempts(hosts[0], state.run_id) if a["task"] == "slow"]
    assert attempt["status"] == "failed"
    release.touch()  # the stuck code ends; its late outcome changes nothing
    until(lambda: not [r for r in hosts[0].view("ExecutionLog") if r["Status"] == "running"],
          "the stuck task never ended")
    assert get_run(hosts[0], state.run_id)["tasks"][0]["status"] == "failed"  # type: ignore[index]


def test_resume_from_a_task_runs_it_and_everything_after_it_again(
        hosts: list[sbroker.Broker], tmp_path: Path) -> None:
    log = tmp_path / "ran.txt"
    p = pipeline(note("a", log), note("b", log, ("a",)), note("c", log, ("b",)),
                 note("x", log))
    first = start_run(hosts[0], p)
    assert first.status == "succeeded"
    with pytest.raises(PipelineError, match="--from names 'nope'"):
        resume_run(hosts[0], p, first.run_id, rerun_from="nope")
    again = resume_run(hosts[0], p, first.run_id, rerun_from="b")
    assert again.run_id == first.run_id and again.status == "succeeded"
    ran = log.read_text().split()
    assert {n: ran.count(n) for n in "abcx"} == {"a": 1, "b": 2, "c": 2, "x": 1}
    assert {n: t.attempts for n, t in again.tasks.items()} == {"a": 1, "b": 2, "c": 2, "x": 1}
    assert len(run_attempts(hosts[0], first.run_id)) == 6  # the earlier attempts stay
