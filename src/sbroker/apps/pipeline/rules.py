"""The parts of a pipeline file beyond single tasks: durations, retry and timeout settings,
``[schedule]``, and the checks of the ``after`` graph (unknown names, duplicates, cycles).

Each function takes an ``error(message, key)`` factory from the parser, which knows the file
and finds the line, so every problem stays one line naming where it is.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from croniter import croniter

from sbroker.apps.pipeline.intervals import RUN_CONTEXT
from sbroker.apps.pipeline.model import DEFAULT_LEASE, Retry, Schedule, TaskSpec

__all__ = ["ITEM", "RESERVED", "RETRY_KEYS", "RUN_CONTEXT", "SCHEDULE_KEYS", "SPARK", "Error",
           "ancestors", "check_cron", "check_graph", "classify_params", "cycle_of",
           "parse_duration", "parse_lease", "parse_retry", "parse_schedule", "parse_timeout"]

RETRY_KEYS = {"retries", "retry_delay", "retry_backoff", "retry_max_delay", "timeout"}
SCHEDULE_KEYS = {"every", "cron", "timezone", "catchup", "overlap", "max_active_runs"}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
Error = Callable[[str, str | None], Exception]


def parse_duration(value: object) -> float | None:
    """Seconds of ``"250ms"``, ``"10s"``, ``"5m"``, ``"2h"`` or a number; None if not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if value >= 0 else None
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return float(match.group(1)) * _UNITS[match.group(2)]
    return None


def _duration(raw: Mapping[str, Any], key: str, default: float, error: Error, *,
              positive: bool = False) -> float:
    if key not in raw:
        return default
    seconds = parse_duration(raw[key])
    if seconds is None or (positive and seconds <= 0):
        raise error(f"{key!r} must be a duration such as \"250ms\", \"10s\", \"5m\", \"2h\" "
                    f"or a number of seconds, got {raw[key]!r}", key)
    return seconds


def parse_retry(raw: Mapping[str, Any], default: Retry, error: Error) -> Retry:
    """The retry settings of a task (or of ``[options]``), over ``default``."""
    retries = raw.get("retries", default.retries)
    if type(retries) is not int or retries < 0:
        raise error(f"'retries' must be an integer >= 0, got {retries!r}", "retries")
    backoff = raw.get("retry_backoff", default.backoff)
    if isinstance(backoff, bool) or not isinstance(backoff, int | float) or backoff < 1:
        raise error(f"'retry_backoff' must be a number >= 1, got {backoff!r}",
                    "retry_backoff")
    return Retry(retries, _duration(raw, "retry_delay", default.delay, error),
                 float(backoff), _duration(raw, "retry_max_delay", default.max_delay, error))


def parse_timeout(raw: Mapping[str, Any], default: float | None, error: Error) -> float | None:
    """``timeout`` of a task (or of ``[options]``): seconds > 0, or ``default``."""
    if "timeout" not in raw:
        return default
    return _duration(raw, "timeout", 0.0, error, positive=True)


def parse_lease(raw: Mapping[str, Any], error: Error) -> float:
    """``lease`` of ``[options]``: how long a run's driver holds it unless it renews (at
    least a second: a driver renews it several times a lease)."""
    lease = _duration(raw, "lease", DEFAULT_LEASE, error, positive=True)
    if lease < 1.0:
        raise error(f"'lease' must be at least 1s, got {raw['lease']!r}", "lease")
    return lease


def parse_schedule(raw: Mapping[str, Any], error: Error) -> Schedule:
    """``[schedule]``: exactly one of ``every`` and ``cron`` (five fields), a known
    ``timezone``, a boolean ``catchup``, ``overlap`` "skip" or "queue", ``max_active_runs``
    an integer >= 1."""
    if ("every" in raw) == ("cron" in raw):
        raise error("[schedule] needs exactly one of 'every' and 'cron'",
                    "cron" if "cron" in raw else None)
    every = _duration(raw, "every", 0.0, error, positive=True) if "every" in raw else None
    cron = raw.get("cron")
    if cron is not None:
        check_cron(cron, error)
    timezone = raw.get("timezone", "UTC")
    try:
        zoneinfo.ZoneInfo(str(timezone))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise error(f"unknown timezone {timezone!r}", "timezone") from None
    catchup = raw.get("catchup", False)
    if not isinstance(catchup, bool):
        raise error("'catchup' must be true or false", "catchup")
    overlap = raw.get("overlap", "skip")
    if overlap not in ("skip", "queue"):
        raise error(f"'overlap' must be \"skip\" or \"queue\", got {overlap!r}", "overlap")
    most = raw.get("max_active_runs", 1)
    if type(most) is not int or most < 1:
        raise error(f"'max_active_runs' must be an integer >= 1, got {most!r}",
                    "max_active_runs")
    return Schedule(every, cron, str(timezone), catchup, overlap, most)


def check_cron(cron: object, error: Error) -> str:
    """A five-field cron expression that croniter accepts, else the error."""
    if not isinstance(cron, str) or len(cron.split()) != 5 or not croniter.is_valid(cron):
        raise error(f"'cron' must be a cron expression of five fields such as \"0 2 * * *\","
                    f" got {cron!r}", "cron")
    return cron


def cycle_of(tasks: Sequence[TaskSpec]) -> list[str] | None:
    """The names of one cycle of ``after`` edges (in order, first repeated last), or None."""
    after = {t.name: t.after for t in tasks}
    state: dict[str, int] = {}  # 1 on the path, 2 done
    for root in after:
        if state.get(root):
            continue
        path: list[str] = []
        stack: list[tuple[str, int]] = [(root, 0)]
        while stack:
            name, i = stack.pop()
            if i == 0:
                state[name] = 1
                path.append(name)
            deps = after.get(name, ())
            if i < len(deps):
                stack.append((name, i + 1))
                dep = deps[i]
                if state.get(dep) == 1:
                    return [*path[path.index(dep):], dep]
                if not state.get(dep):
                    stack.append((dep, 0))
                continue
            state[name] = 2
            path.pop()
    return None


def check_graph(tasks: Sequence[TaskSpec], error: Callable[[str, TaskSpec], Exception]) -> None:
    """Unknown names in ``after``, a task after itself and cycles, as one-line errors."""
    names = {t.name for t in tasks}
    for task in tasks:
        for dep in task.after:
            if dep not in names:
                raise error(f"task {task.name!r} comes after {dep!r}, which is not a task of"
                            " this pipeline", task)
    cycle = cycle_of(tasks)
    if cycle is not None:
        first = next(t for t in tasks if t.name == cycle[0])
        raise error("the tasks' 'after' lists make a cycle: " + " -> ".join(cycle), first)


#: What the runner gives a task besides the values of the tasks before it (docs/pipelines.md)
SPARK, ITEM = "spark", "item"
RESERVED = frozenset({SPARK, ITEM, *RUN_CONTEXT})


def ancestors(tasks: Sequence[TaskSpec]) -> dict[str, set[str]]:
    """Every task's ancestors: the tasks it comes after, directly or not (no cycle)."""
    after = {t.name: t.after for t in tasks}
    out: dict[str, set[str]] = {}

    def visit(name: str) -> set[str]:
        if name not in out:
            out[name] = set()  # guards against a cycle: check_graph reports those
            found: set[str] = set()
            for dep in after.get(name, ()):
                found.add(dep)
                found |= visit(dep)
            out[name] = found
        return out[name]

    for task in tasks:
        visit(task.name)
    return out


def classify_params(task: str, params: Sequence[tuple[str, bool]], *, mapped: bool,
                    before: Collection[str], tasks: Collection[str],
                    given: Collection[str] = ()
                    ) -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    """What each of a task function's ``(name, has a default)`` parameters receives:
    ``(inputs, pipeline parameters, error)``. ``spark`` is the session; ``item`` a mapped
    task's item; a name of a task in ``before`` (those it comes after, directly or not) that
    task's value; ``scheduled_for`` / ``scheduled_date`` the run's; one with a default is
    a pipeline parameter; ``given`` are set by the definition itself (TOML ``args``).
    Anything else is the error, one line."""
    inputs: list[str] = []
    own: list[str] = []
    for name, has_default in params:
        if name == SPARK or name in given:
            continue
        if (name == ITEM and mapped) or name in before or name in RUN_CONTEXT:
            inputs.append(name)
        elif name in tasks:
            return (), (), (f"task {task!r} takes a parameter {name!r}, named after a task it"
                            f" does not come after: add {name!r} to its 'after'")
        elif has_default:
            own.append(name)
        elif name == ITEM:
            return (), (), (f"task {task!r} takes 'item', which only a mapped task gets "
                            "(map=TASK)")
        else:
            return (), (), (f"task {task!r} takes a parameter {name!r} that is neither "
                            "'spark', 'item' (mapped tasks), a task it comes after, nor has "
                            "a default")
    return tuple(inputs), tuple(own), None
