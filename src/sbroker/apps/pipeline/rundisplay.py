"""What a user sees of a durable run: one line per attempt started or ended, then a table of
every task (status, attempts, time, value, error) and the verdict, with how to resume it.
``sbroker runs show`` prints the same table from the database."""

from __future__ import annotations

import datetime as dt
import json
import textwrap
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sbroker.apps.pipeline.listeners import RunListener
from sbroker.apps.pipeline.model import TaskStatus
from sbroker.apps.pipeline.runstate import RunState, TaskState

__all__ = ["RunDisplay", "format_seconds", "render_run_report", "render_run_table",
           "stored_run_table"]

_STYLE = {
    "pending": ("·", "dim"), "running": ("●", "yellow"), "retrying": ("↻", "yellow"),
    "succeeded": ("✓", "green"), "failed": ("✗", "bold red"), "cancelled": ("⊘", "magenta"),
    "skipped": ("-", "dim"),
}


def format_seconds(seconds: float | None) -> str:
    """``4.2s``, ``3m05s``, ``1h02m``; empty for ``None``."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _short(value: Any, width: int = 60) -> str:
    if value is None:
        return ""
    text = json.dumps(value, separators=(", ", ": "), default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _one_line(text: str | None, width: int = 200) -> Text:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return Text(line if len(line) <= width else line[: width - 1] + "…", no_wrap=True,
                overflow="ellipsis")


def _status(status: str) -> Text:
    mark, style = _STYLE.get(status, ("?", ""))
    return Text(f"{mark} {status}", style=style)


def render_run_table(title: str, rows: Iterable[Mapping[str, Any]]) -> Table:
    """The table of a run's tasks: each row's ``name``, ``status``, ``attempts``, ``time``
    (text), ``value`` and ``error``."""
    table = Table(title=title, title_justify="left")
    for column in ("task", "status", "attempts", "time"):
        table.add_column(column, no_wrap=True,
                         justify="right" if column in ("attempts", "time") else "left")
    table.add_column("value", max_width=40)
    table.add_column("error", max_width=60)  # the columns that give way when narrow
    for row in rows:
        table.add_row(row["name"], _status(row["status"]), str(row["attempts"]), row["time"],
                      _one_line(_short(row["value"], 200)), _one_line(row["error"]))
    return table


def _span(start: str | None, end: str | None) -> str:
    if not start or not end:
        return ""
    return format_seconds((dt.datetime.fromisoformat(end)
                           - dt.datetime.fromisoformat(start)).total_seconds())


def stored_run_table(run: Mapping[str, Any]) -> Table:
    """The table of a run as ``get_run`` reads it (``sbroker runs show``)."""
    driver = run.get("driver")
    title = (f"run {run['run_id']} of pipeline {run['pipeline']}"
             + (f" for {run['scheduled_for']}" if run.get("scheduled_for") else "")
             + f": {run['status']}"
             + (f", driven by {driver['host']} (pid {driver['pid']})" if driver else
                ", no live driver (a server takes it over)" if run["status"] == "running"
                else "")
             + (f", taken over {run['takeovers']}x" if run.get("takeovers") else ""))
    return render_run_table(title, [{**t, "time": _span(t["start_time"], t["end_time"])}
                                    for t in run["tasks"]])


class RunDisplay(RunListener):
    """Plain lines while the run goes, the report at its end."""

    def __init__(self, console: Console, *, verbose: bool = False,
                 resumable: bool = True) -> None:
        self.console = console
        self.verbose = verbose
        self.resumable = resumable  # False: a throwaway database (--local)

    def _say(self, text: str) -> None:
        self.console.print(text, highlight=False, soft_wrap=True)

    def run_started(self, run: RunState) -> None:
        """Name the run, and what a resume keeps."""
        name = escape(run.pipeline.name)
        if run.status == "succeeded":
            self._say(f"run {run.run_id} of pipeline {name} succeeded already: nothing to run")
            return
        kept = sum(1 for t in run.tasks.values() if t.kept)
        verb = "taken over" if run.takeover else "resuming" if run.resumed else "started"
        extra = f", {kept} succeeded already and kept" if run.resumed else ""
        self._say(f"run {run.run_id} of pipeline {name} {verb}: {len(run.tasks)} tasks{extra}")

    def task_started(self, run: RunState, task: TaskState) -> None:
        """An attempt was sent."""
        attempt = f" (attempt {task.attempts})" if task.attempts > 1 else ""
        self._say(f"  {escape(task.name)} started{attempt}")

    def task_finished(self, run: RunState, task: TaskState) -> None:
        """An attempt ended, or the task was skipped."""
        line = f"  {escape(task.name)} {task.status}"
        if task.status == TaskStatus.SUCCEEDED:
            line += f" in {format_seconds(task.seconds)}"
            value = _short(task.value)
            line += f": {escape(value)}" if value else ""
        elif task.status == TaskStatus.RETRYING:
            line += f" (failed attempt {task.attempts}: {escape(task.error or '')})"
        elif task.status in (TaskStatus.FAILED, TaskStatus.CANCELLED):
            line += f": {escape(task.error or '')}"
        self._say(line)

    def run_finished(self, run: RunState) -> None:
        """The report (or why this process stopped driving the run)."""
        if run.lost:
            self._say(f"run {run.run_id}: another process drives it now (this one's lease"
                      " expired): this process lets it go")
        elif run.handed_back:
            self._say(f"run {run.run_id} handed back: a server takes it over")
        elif run.status != "succeeded" or not run.resumed or any(not t.kept
                                                                 for t in run.tasks.values()):
            self.console.print(render_run_report(run, verbose=self.verbose,
                                                 resumable=self.resumable))


def render_run_report(run: RunState, *, verbose: bool = False,
                      resumable: bool = True) -> RenderableType:
    """A table of the run's tasks, then the verdict, the failed tasks' errors (tracebacks
    with ``verbose``) and, unless it succeeded, how to resume it."""
    table = render_run_table(f"run {run.run_id} of pipeline {run.pipeline.name}", [
        {"name": t.name, "status": t.status, "attempts": t.attempts,
         "time": "kept" if t.kept else format_seconds(t.seconds), "value": t.value,
         "error": t.error if t.status != TaskStatus.SUCCEEDED else None}
        for t in run.tasks.values()])
    parts: list[RenderableType] = [table]
    name = run.pipeline.name
    if run.ok:
        parts.append(Text(f"pipeline {name} succeeded in {format_seconds(run.seconds)}",
                          style="bold green"))
        return Group(*parts)
    reason = ("was interrupted" if run.interrupted else
              "was cancelled" if run.status == "cancelled" else "failed")
    parts.append(Text(f"pipeline {name} {reason} after {format_seconds(run.seconds)}",
                      style="bold red"))
    hidden = False
    for task in run.tasks.values():
        if task.status not in (TaskStatus.FAILED, TaskStatus.CANCELLED):
            continue
        log_id = task.last_log_id
        parts.append(Text(f"  ✗ {task.name}" + (f" (log {log_id})" if log_id else "")
                          + f": {task.error or task.status}", style="red"))
        if task.details and verbose:
            parts.append(Text(textwrap.indent(task.details.rstrip(), "    "), style="dim"))
        hidden = hidden or bool(task.details and not verbose)
    if hidden:
        parts.append(Text("  sbroker run -v shows the tracebacks (ExecutionLog keeps them in"
                          " ErrorDetails)", style="dim"))
    skipped = [t.name for t in run.tasks.values() if t.status == TaskStatus.SKIPPED]
    if skipped:
        parts.append(Text(f"  skipped: {', '.join(skipped)}", style="dim"))
    if resumable:
        parts.append(Text(f"  resume it with: sbroker run FILE --resume {run.run_id}",
                          style="dim"))
    return Group(*parts)
