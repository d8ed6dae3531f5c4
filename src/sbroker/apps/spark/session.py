"""``SparkRunner``: runs tasks on one shared, lazily created SparkSession.

Classic mode (a master URL): each task's thread gets the scheduler's FAIR pool, a job group
named ``str(log_id)`` (interrupt on cancel) and the job tag ``sbroker-task-<log_id>``, all
cleared in ``finally`` because executor threads are reused (PySpark's pinned-thread mode maps
each Python thread to its own JVM thread, so these thread-local properties are per task).
``cancel`` uses ``SparkContext.cancelJobsWithTag`` and ``cancelJobGroup``: the session-level
``interruptTag`` does not cancel jobs started from other threads in classic mode.
Spark Connect (``remote=``): the tag is set with ``spark.addTag`` and cancelled with
``spark.interruptTag``; pools, job groups and job ids do not exist there (job ids are ``[]``).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sbroker.apps.spark.config import SparkConfig
from sbroker.apps.spark.connect import SparkUnavailable, bound_retries, lost, wait_for_server
from sbroker.apps.spark.logs import jvm_output_to, quiet_spark_logs
from sbroker.apps.spark.runner import RunOutcome, SparkProgress, json_value
from sbroker.apps.spark.tasks import (
    JsonValue,
    SparkSQL,
    Task,
    TaskCancelled,
    TaskError,
    as_task,
    one_line_error,
    resolve_target,
    task_traceback,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["COUNTED_ROWS", "PREVIEW_ROWS", "LazySparkSession", "SparkRunner", "SparkUnavailable",
           "create_session", "job_tag"]

log = logging.getLogger(__name__)

#: A SparkSQL query with at most this many rows returns them in its value (``"data"``).
PREVIEW_ROWS = 10
#: A SparkSQL query's rows are counted from what one job returns when there are at most this
#: many; only a bigger result is counted by a second job (``count()`` runs the query again).
#: A query that Spark's optimizer proves returns at most this many rows is ``collect()``-ed,
#: the same plan as a plain ``spark.sql(q).collect()``; others run ``take(COUNTED_ROWS + 1)``,
#: a plan of its own (a CollectLimit on top) that costs more on small queries.
COUNTED_ROWS = 1000
_RECANCEL_SECONDS = 0.2
CLOSE_TIMEOUT = 20.0  # seconds close() waits for the session to stop
_PRE_CANCELLED_LIMIT = 10_000
_CONNECT_RUNTIME_DEFAULTS = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")


def job_tag(log_id: int) -> str:
    """The Spark job tag of a task: ``sbroker-task-<log_id>``."""
    return f"sbroker-task-{log_id}"


def create_session(config: SparkConfig, *,
                   abort: Callable[[], bool] | None = None) -> SparkSession:
    """Build (or get) the process's SparkSession for ``config``; a Spark Connect server
    gets ``config.connect_timeout`` seconds to answer (less if ``abort()`` says stop)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(config.app_name)
    if config.remote is not None:
        wait_for_server(config.remote, config.connect_timeout, abort)
        builder = builder.remote(config.remote)
        conf = {k: v for k, v in config.effective_conf().items()
                if k in config.conf or k in _CONNECT_RUNTIME_DEFAULTS}
    else:
        builder = builder.master(config.master or "local[2]")
        conf = config.effective_conf()
        quiet_spark_logs(conf, config.master or "local[2]", set(config.conf), config.log_file)
    for key, value in conf.items():
        builder = builder.config(key, value)
    with jvm_output_to(config.log_file if config.remote is None else None):
        session = builder.getOrCreate()
    if config.remote is not None:
        bound_retries(session, config.connect_timeout)
    return session


@dataclass
class _Running:
    log_id: int
    pool: str | None
    thread_id: int = field(default_factory=threading.get_ident)
    cancelled: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    entered: bool = False
    connect_progress: SparkProgress | None = None
    operation_ids: list[str] = field(default_factory=list)  # Spark Connect's, in order


class SparkRunner:
    """The real ``Runner``: one SparkSession shared by every task, created on first use."""

    def __init__(self, config: SparkConfig | None = None, *,
                 session: SparkSession | None = None,
                 session_factory: Callable[[SparkConfig], SparkSession] = create_session,
                 stop_on_close: bool | None = None,
                 close_timeout: float = CLOSE_TIMEOUT) -> None:
        self.config = config or SparkConfig()
        self._factory = session_factory
        self._session: SparkSession | None = session
        self._connect = self.config.is_connect if session is None else _is_connect(session)
        self._stop_on_close = (session is None) if stop_on_close is None else stop_on_close
        self._session_lock = threading.Lock()
        self._close_timeout = close_timeout
        self._failure: tuple[float, Exception] | None = None  # the last failed creation
        self._lock = threading.Lock()
        self._running: dict[int, _Running] = {}
        self._pre_cancelled: OrderedDict[int, None] = OrderedDict()
        self._local = threading.local()
        # (SparkContext, its Java status tracker, pyspark's StatusTracker over that one,
        # java.util.Arrays), made once per context: see _trackers
        self._jvm_helpers: tuple[Any, Any, Any, Any] | None = None

    # -- the session -----------------------------------------------------------------------
    @property
    def started(self) -> bool:
        """True once the SparkSession exists (a JVM or a Connect channel was started)."""
        return self._session is not None

    def session(self) -> SparkSession:
        """The shared SparkSession, created on the first call (thread-safe). A task that
        waited while the creation failed fails with the same error instead of trying again:
        an unreachable server costs one timeout, not one per task."""
        if self._session is None:
            asked = time.monotonic()
            with self._session_lock:
                failure = self._failure
                if self._session is None and failure is not None and failure[0] >= asked:
                    raise failure[1]
                if self._session is None:
                    try:
                        session = (create_session(self.config, abort=self._nobody_waits)
                                   if self._factory is create_session
                                   else self._factory(self.config))
                    except Exception as exc:
                        self._failure = (time.monotonic(), exc)
                        raise
                    self._connect = _is_connect(session)
                    if self._connect:
                        # PySpark 4.3 types the handler as its ABC ProgressHandler; it only
                        # calls it, with the four arguments this method takes
                        session.registerProgressHandler(
                            self._on_connect_progress)  # type: ignore[arg-type]
                    self._session = session
        return self._session

    def _nobody_waits(self) -> bool:
        """True when every task waiting for the session was cancelled (Ctrl-C)."""
        with self._lock:
            return all(state.cancelled.is_set() for state in self._running.values())

    def close(self) -> None:
        """Stop the session if this runner created it, waiting at most ``close_timeout``
        seconds (a Connect session whose server is gone would retry for minutes)."""
        with self._session_lock:
            session, self._session = self._session, None
        if session is None or not self._stop_on_close:
            return
        stopper = threading.Thread(target=session.stop, name="sbroker-spark-stop", daemon=True)
        stopper.start()
        stopper.join(self._close_timeout)
        if stopper.is_alive():
            log.warning("the Spark session did not stop within %g s; leaving it behind",
                        self._close_timeout)

    # -- running ---------------------------------------------------------------------------
    def run(self, task: Task, *, log_id: int, pool: str | None = None) -> RunOutcome:
        """Run ``task`` in this thread, tagged with ``log_id`` and in FAIR pool ``pool``."""
        task = as_task(task)
        state = _Running(log_id, pool)
        with self._lock:
            if log_id in self._running:
                raise ValueError(f"log id {log_id} is already running")
            if log_id in self._pre_cancelled:
                del self._pre_cancelled[log_id]
                raise TaskCancelled(log_id, "cancelled before it started")
            self._running[log_id] = state
        value: JsonValue = None
        try:
            if isinstance(task, SparkSQL):
                value = self._run_sql(self._enter(state), task)
            else:
                function = resolve_target(task.target)
                value = json_value(function(LazySparkSession(lambda: self._enter(state)),
                                            **task.kwargs))
        except Exception as exc:
            job_ids = self._leave(state)
            ops = state.operation_ids
            if state.cancelled.is_set():
                raise TaskCancelled(log_id, "cancelled", job_ids, operation_ids=ops) from exc
            error = one_line_error(exc)
            if self._connect and type(exc).__name__ == "RetriesExceeded" and self.config.remote:
                error = lost(self.config.remote, error)
            if isinstance(exc, AssertionError) and not state.entered and not str(exc):
                error += (" (pyspark.sql.functions need a running session: use `spark` first,"
                          " e.g. spark.range(...), before building columns)")
            raise TaskError(log_id, error, job_ids, task_traceback(exc), ops) from exc
        except BaseException:
            self._leave(state)
            raise
        job_ids = self._leave(state)
        if state.cancelled.is_set():
            raise TaskCancelled(log_id, "cancelled", job_ids, operation_ids=state.operation_ids)
        return RunOutcome(value, job_ids, state.operation_ids)

    def _run_sql(self, spark: SparkSession, task: SparkSQL) -> JsonValue:
        args: Any = task.args
        frame = spark.sql(task.sql, args) if args is not None else spark.sql(task.sql)
        bound = None if self._connect else _row_bound(frame)
        if bound is not None and bound <= COUNTED_ROWS:
            rows = frame.collect()
        else:
            rows = frame.take(COUNTED_ROWS + 1)
        # a command (already executed eagerly by spark.sql) has no columns; the schema is
        # only asked for when no row came back: it costs two more calls into the JVM
        if not rows and not frame.columns:
            return None
        if len(rows) <= PREVIEW_ROWS:
            return {"rows": len(rows), "data": json_value([list(r) for r in rows])}
        return {"rows": len(rows) if len(rows) <= COUNTED_ROWS else frame.count()}

    def _enter(self, state: _Running) -> SparkSession:
        """Create the session if needed and tag the task's thread (once, idempotent)."""
        spark = self.session()
        if state.entered or threading.get_ident() != state.thread_id:
            return spark  # child threads should be pyspark.InheritableThread
        state.entered = True
        tag = job_tag(state.log_id)
        if self._connect:
            spark.addTag(tag)
            self._local.log_id = state.log_id
        else:
            sc = spark.sparkContext
            sc.setLocalProperty("spark.scheduler.pool", state.pool)  # type: ignore[arg-type]
            sc.setJobGroup(str(state.log_id), f"sbroker task {state.log_id}",
                           interruptOnCancel=True)
            sc.addJobTag(tag)
        if state.cancelled.is_set():
            raise TaskCancelled(state.log_id, "cancelled")
        return spark

    def _leave(self, state: _Running) -> list[int]:
        """Collect the task's job ids, clear the thread's tags, forget the task."""
        job_ids: list[int] = []
        try:
            if state.entered and self._session is not None:
                spark = self._session
                if self._connect:
                    spark.removeTag(job_tag(state.log_id))
                    self._local.log_id = None
                else:
                    sc = spark.sparkContext
                    job_ids = self._job_ids(sc, str(state.log_id))
                    sc.clearJobTags()
                    sc._jsc.clearJobGroup()
                    sc.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]
        finally:
            state.done.set()
            with self._lock:
                self._running.pop(state.log_id, None)
        return job_ids

    def _job_ids(self, sc: Any, group: str) -> list[int]:
        """The ids of the Spark jobs of job group ``group``, in two calls into the JVM.

        ``StatusTracker.getJobIdsForGroup`` returns a Java array that Python reads one
        element per call (plus one for its length), through a tracker made by a call of its
        own: a task spent more calls on this than on running its query.
        """
        tracker, _, arrays = self._trackers(sc)
        text = str(arrays.toString(tracker.getJobIdsForGroup(group)))  # "[3, 7]"
        return sorted(int(x) for x in text.strip("[]").split(",") if x.strip())

    def _trackers(self, sc: Any) -> tuple[Any, Any, Any]:
        """(Java status tracker, pyspark ``StatusTracker`` over it, ``java.util.Arrays``) of
        ``sc``, made once per SparkContext (``sc.statusTracker()`` costs a JVM call each)."""
        cached = self._jvm_helpers
        if cached is None or cached[0] is not sc:
            from pyspark.status import StatusTracker

            java = sc._jsc.statusTracker()
            cached = (sc, java, StatusTracker(java), sc._jvm.java.util.Arrays)
            self._jvm_helpers = cached
        return cached[1], cached[2], cached[3]

    # -- cancelling ------------------------------------------------------------------------
    def cancel(self, log_id: int) -> bool:
        """Cancel the task's Spark jobs now and until it ends; if it has not started yet, its
        ``run`` will raise ``TaskCancelled`` at once."""
        with self._lock:
            state = self._running.get(log_id)
            if state is None:
                self._pre_cancelled[log_id] = None
                while len(self._pre_cancelled) > _PRE_CANCELLED_LIMIT:
                    self._pre_cancelled.popitem(last=False)
                return False
            already = state.cancelled.is_set()
            state.cancelled.set()
        if not already:
            self._cancel_jobs(log_id)
            # A job submitted just after the call would escape it: keep cancelling until the
            # task ends (the task is reported cancelled whatever its jobs did).
            threading.Thread(target=self._keep_cancelling, args=(state,), daemon=True,
                             name=f"sbroker-cancel-{log_id}").start()
        return True

    def _keep_cancelling(self, state: _Running) -> None:
        while not state.done.wait(_RECANCEL_SECONDS):
            self._cancel_jobs(state.log_id)

    def _cancel_jobs(self, log_id: int) -> None:
        spark = self._session
        if spark is None:
            return
        try:
            if self._connect:
                spark.interruptTag(job_tag(log_id))
            else:
                sc = spark.sparkContext
                sc.cancelJobsWithTag(job_tag(log_id))
                sc.cancelJobGroup(str(log_id))
        except Exception:  # a stopped context or a closed channel: nothing left to cancel
            log.debug("cancel of log id %s failed", log_id, exc_info=True)

    # -- progress --------------------------------------------------------------------------
    def progress(self, log_id: int) -> SparkProgress | None:
        """Spark task progress of a running task (classic: status tracker; Connect: the
        server's progress reports)."""
        with self._lock:
            state = self._running.get(log_id)
        if state is None or not state.entered or self._session is None:
            return None
        if self._connect:
            return state.connect_progress
        try:
            sc = self._session.sparkContext
            return _tracker_progress(self._trackers(sc)[1], self._job_ids(sc, str(log_id)))
        except Exception:
            log.debug("progress of log id %s unavailable", log_id, exc_info=True)
            return None

    def _on_connect_progress(self, stages: Iterable[Any] | None, inflight_tasks: int,
                             operation_id: str | None, done: bool) -> None:
        log_id = getattr(self._local, "log_id", None)
        with self._lock:
            state = self._running.get(log_id) if log_id is not None else None
        if state is None:
            return
        if operation_id and operation_id not in state.operation_ids:
            state.operation_ids.append(operation_id)
        stage_list = list(stages or [])
        state.connect_progress = SparkProgress(
            jobs=1, active_jobs=0 if done else 1,
            tasks=sum(s.num_tasks for s in stage_list),
            completed_tasks=sum(s.num_completed_tasks for s in stage_list),
            active_tasks=inflight_tasks)


def _tracker_progress(tracker: Any, job_ids: list[int]) -> SparkProgress:
    jobs = active_jobs = tasks = completed = active = failed = 0
    for job_id in job_ids:
        job = tracker.getJobInfo(job_id)
        if job is None:
            continue
        jobs += 1
        finished = job.status == "SUCCEEDED"
        active_jobs += job.status == "RUNNING"
        for stage_id in job.stageIds:
            stage = tracker.getStageInfo(stage_id)
            if stage is None:
                continue
            tasks += stage.numTasks
            # a finished job's skipped stages never ran their tasks: count them as done
            completed += stage.numTasks if finished else stage.numCompletedTasks
            active += stage.numActiveTasks
            failed += stage.numFailedTasks
    return SparkProgress(jobs, active_jobs, tasks, completed, active, failed)


def _row_bound(frame: Any) -> int | None:
    """The most rows Spark's optimizer proves ``frame`` returns (``LogicalPlan.maxRows``:
    1 for an aggregate without GROUP BY, n under a LIMIT n, a range's length), or None when
    it is unknown (classic frames only: a Spark Connect frame has no ``_jdf``)."""
    try:  # "Some(1)" or "None": two calls fewer than Option.isEmpty() and Option.get()
        text = str(frame._jdf.queryExecution().optimizedPlan().maxRows().toString())
    except Exception:  # the query's own error, if any, comes from take() below
        log.debug("no row bound for a SparkSQL frame", exc_info=True)
        return None
    if text.startswith("Some(") and text.endswith(")") and text[5:-1].isdigit():
        return int(text[5:-1])
    return None


def _is_connect(session: Any) -> bool:
    return type(session).__module__.startswith("pyspark.sql.connect")


class LazySparkSession:
    """What a ``PythonTask`` receives as ``spark``: the real session, created (and the task's
    thread tagged) when the function first touches it. Use it as a SparkSession."""

    __slots__ = ("_sbroker_resolve",)

    def __init__(self, resolve: Callable[[], SparkSession]) -> None:
        object.__setattr__(self, "_sbroker_resolve", resolve)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sbroker_resolve(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._sbroker_resolve(), name, value)

    def __repr__(self) -> str:
        return "<LazySparkSession>"
