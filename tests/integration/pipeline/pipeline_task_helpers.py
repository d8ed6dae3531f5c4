"""Python task targets used by the pipeline tests (called as ``f(spark, **kwargs)``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def add(spark: Any, a: int, b: int) -> int:
    """A task that never touches spark."""
    return a + b


def boom(spark: Any, message: str = "boom") -> None:
    """A task that fails."""
    raise RuntimeError(message)


def not_json(spark: Any) -> object:
    """A task whose value cannot travel as JSON."""
    return object()


NOT_CALLABLE = 3


def flaky(spark: Any, path: str, fails: int) -> int:
    """Fails its first ``fails`` calls (counted in the file at ``path``), then returns the
    number of calls before this one."""
    counter = Path(path)
    calls = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(calls + 1))
    if calls < fails:
        raise RuntimeError(f"transient failure {calls + 1}")
    return calls


def note(spark: Any, path: str, name: str, value: int = 0) -> int:
    """Append ``name`` to the file at ``path`` (which tasks ran, in order) and return
    ``value``."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(name + "\n")
    return value


def hang(spark: Any, release: str, seconds: float = 60.0) -> str:
    """A task whose code ignores cancel: it returns only once the file ``release`` exists
    (or after ``seconds``)."""
    import threading

    tick = threading.Event()
    for _ in range(int(seconds / 0.02)):
        if Path(release).exists():
            return "released"
        tick.wait(0.02)
    return "never released"


def when(spark: Any, day: str, at: str, fail_days: str = "") -> dict[str, str]:
    """The run's ``scheduled_date`` and ``scheduled_for`` as its task read them; fails for a
    day listed (one a line) in the file ``fail_days``."""
    if fail_days and Path(fail_days).exists() and day in Path(fail_days).read_text().split():
        raise RuntimeError(f"no data for {day}")
    return {"day": day, "at": at}


def pause(spark: Any, seconds: float) -> float:
    """A task that takes ``seconds`` (the runs of a schedule that may overlap)."""
    import threading

    threading.Event().wait(seconds)
    return seconds
