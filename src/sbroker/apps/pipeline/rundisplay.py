"""What a user sees of a durable run: one line per attempt started or ended, then a table of
every task (status, attempts, time, value) and the verdict, with how to resume it."""

from __future__ import annotations

import textwrap

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sbroker.apps.pipeline.display import _one_line, _short_value, _state_text, format_seconds
from sbroker.apps.pipeline.runstate import RunListener, RunState, TaskState

__all__ = ["RunDisplay", "render_run_report"]


class RunDisplay(RunListener):
    """Plain lines while the run goes, the report at its end."""

    def __init__(self, console: Console, *, verbose: bool = False) -> None:
        self.console = console
        self.verbose = verbose

    def _say(self, text: str) -> None:
        self.console.print(text, highlight=False, soft_wrap=True)

    def run_started(self, run: RunState) -> None:
        """Name the run, and what a resume keeps."""
        name = escape(run.pipeline.name)
        if run.status == "succeeded":
            self._say(f"run {run.run_id} of pipeline {name} succeeded already: nothing to run")
            return
        kept = sum(1 for t in run.tasks.values() if t.kept)
        verb = "resuming" if run.resumed else "started"
        extra = f", {kept} succeeded already and kept" if run.resumed else ""
        self._say(f"run {run.run_id} of pipeline {name} {verb}: {len(run.tasks)} tasks{extra}")

    def task_started(self, run: RunState, task: TaskState) -> None:
        """An attempt was sent."""
        attempt = f" (attempt {task.attempts})" if task.attempts > 1 else ""
        self._say(f"  {escape(task.name)} started{attempt}")

    def task_finished(self, run: RunState, task: TaskState) -> None:
        """An attempt ended, or the task was skipped."""
        line = f"  {escape(task.name)} {task.status}"
        if task.status == "succeeded":
            line += f" in {format_seconds(task.seconds)}"
            value = _short_value(task.value)
            line += f": {escape(value)}" if value else ""
        elif task.status == "retrying":
            line += f" (failed attempt {task.attempts}: {escape(task.error or '')})"
        elif task.status in ("failed", "cancelled"):
            line += f": {escape(task.error or '')}"
        self._say(line)

    def run_finished(self, run: RunState) -> None:
        """The report."""
        if run.status != "succeeded" or not run.resumed or any(not t.kept
                                                               for t in run.tasks.values()):
            self.console.print(render_run_report(run, verbose=self.verbose))


def render_run_report(run: RunState, *, verbose: bool = False) -> RenderableType:
    """A table of the run's tasks, then the verdict, the failed tasks' errors (tracebacks
    with ``verbose``) and, unless it succeeded, how to resume it."""
    table = Table(title=f"run {run.run_id} of pipeline {run.pipeline.name}",
                  title_justify="left")
    for column in ("task", "status", "attempts", "time", "log id"):
        table.add_column(column, no_wrap=True,
                         justify="right" if column in ("attempts", "time", "log id") else "left")
    table.add_column("result", max_width=60)
    for task in run.tasks.values():
        log_id = task.last_log_id or task.log_id
        table.add_row(task.name, _state_text(task.status), str(task.attempts),
                      "kept" if task.kept else format_seconds(task.seconds),
                      str(log_id) if log_id is not None else "",
                      _one_line(_short_value(task.value, 200)))
    parts: list[RenderableType] = [table]
    name = run.pipeline.name
    if run.ok:
        parts.append(Text(f"pipeline {name} succeeded in {format_seconds(run.seconds)}",
                          style="bold green"))
        return Group(*parts)
    reason = "was interrupted" if run.interrupted else "failed"
    parts.append(Text(f"pipeline {name} {reason} after {format_seconds(run.seconds)}",
                      style="bold red"))
    hidden = False
    for task in run.tasks.values():
        if task.status not in ("failed", "cancelled"):
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
    skipped = [t.name for t in run.tasks.values() if t.status == "skipped"]
    if skipped:
        parts.append(Text(f"  skipped: {', '.join(skipped)}", style="dim"))
    parts.append(Text(f"  resume it with: sbroker run FILE --resume {run.run_id}", style="dim"))
    return Group(*parts)
