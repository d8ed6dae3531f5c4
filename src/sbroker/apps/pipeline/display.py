"""What a user sees of a pipeline run: a live table while it runs, then a summary.

On a terminal the live table (``rich.live.Live``) shows each stage and task with its state,
elapsed time and, for running tasks, a bar of Spark tasks completed when Spark reports it.
Elsewhere (a CI log, a pipe) one plain line is printed per event instead.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.progress_bar import ProgressBar
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from sbroker.apps.pipeline.run import (
    PipelineRun,
    RunObserver,
    StageRun,
    TaskRun,
)
from sbroker.apps.pipeline.scheduler import TaskMonitor

__all__ = ["LiveDisplay", "PlainDisplay", "format_seconds", "make_display", "render_report"]

_STYLE = {
    "pending": ("·", "dim"), "queued": ("○", "cyan"), "running": ("●", "yellow"),
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


def _short_value(value: Any, width: int = 60) -> str:
    if value is None:
        return ""
    text = json.dumps(value, separators=(", ", ": "), default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _one_line(text: str) -> Text:
    return Text(text, no_wrap=True, overflow="ellipsis")


def _state_text(state: str) -> Text:
    mark, style = _STYLE.get(state, ("?", ""))
    return Text(f"{mark} {state}", style=style)


class _LiveView:
    """The renderable the live display refreshes: it reads the run state on every frame."""

    def __init__(self, run: PipelineRun, monitor: TaskMonitor | None) -> None:
        self.run = run
        self.monitor = monitor
        self.spinner = Spinner("dots", style="yellow")

    def _task_state(self, task: TaskRun) -> str:
        if task.state != "queued" or task.log_id is None or self.monitor is None:
            return task.state
        try:
            return "running" if self.monitor.started_at(task.log_id) is not None else "queued"
        except Exception:
            return task.state

    def _progress(self, task: TaskRun) -> RenderableType:
        if self.monitor is None or task.log_id is None:
            return ""
        try:
            progress = self.monitor.progress(task.log_id)
        except Exception:
            return ""
        if progress is None or not progress.tasks:
            return ""
        bar = ProgressBar(total=progress.tasks, completed=progress.completed_tasks, width=24)
        label = Text(f" {progress.completed_tasks}/{progress.tasks} spark tasks", style="dim")
        table = Table.grid()
        table.add_row(bar, label)
        return table

    def __rich__(self) -> RenderableType:
        run = self.run
        done = sum(1 for s in run.stages for t in s.tasks if t.result is not None)
        title = Text.assemble((run.pipeline.name, "bold"),
                              f"  {done}/{run.pipeline.task_count} tasks  "
                              f"{format_seconds(run.seconds)}")
        table = Table(box=None, show_header=False, padding=(0, 1), expand=False)
        table.add_column("name", no_wrap=True)
        table.add_column("state", no_wrap=True)
        table.add_column("time", justify="right", no_wrap=True)
        table.add_column("spark", no_wrap=True)
        for stage in run.stages:
            table.add_row(Text(stage.stage.name, style="bold"), _state_text(stage.state),
                          format_seconds(stage.seconds), "")
            if stage.state in ("pending", "skipped"):
                continue
            for task in stage.tasks:
                state = self._task_state(task)
                mark: RenderableType = _state_text(state)
                if state == "running":
                    mark = Table.grid()
                    mark.add_row(self.spinner, Text(" running", style="yellow"))
                extra = self._progress(task) if state == "running" else Text(
                    _short_value(task.result.value if task.result else None, 40), style="dim")
                table.add_row(f"  {task.spec.name}", mark,
                              format_seconds(task.seconds) if state != "queued" else "", extra)
        return Group(title, table)


class LiveDisplay(RunObserver):
    """The terminal display: a live table while running, the report when done."""

    def __init__(self, console: Console, monitor: TaskMonitor | None = None,
                 refresh_per_second: float = 4, *, verbose: bool = False) -> None:
        self.console = console
        self.monitor = monitor
        self.refresh_per_second = refresh_per_second
        self.verbose = verbose
        self._live: Live | None = None

    def pipeline_started(self, run: PipelineRun) -> None:
        """Start the live table."""
        self._live = Live(_LiveView(run, self.monitor), console=self.console,
                          refresh_per_second=self.refresh_per_second, transient=True,
                          redirect_stdout=True, redirect_stderr=True)
        self._live.start()

    def pipeline_finished(self, run: PipelineRun) -> None:
        """Replace the live table by the report."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        self.console.print(render_report(run, verbose=self.verbose))


class PlainDisplay(RunObserver):
    """A line per event, for logs and pipes."""

    def __init__(self, console: Console, *, verbose: bool = False) -> None:
        self.console = console
        self.verbose = verbose

    def pipeline_started(self, run: PipelineRun) -> None:
        """Name the pipeline."""
        self.console.print(f"pipeline {escape(run.pipeline.name)}: {len(run.stages)} stages, "
                           f"{run.pipeline.task_count} tasks", highlight=False, soft_wrap=True)

    def stage_started(self, run: PipelineRun, stage: StageRun) -> None:
        """Announce a stage."""
        self.console.print(f"stage {escape(stage.stage.name)}: {len(stage.tasks)} tasks sent",
                           highlight=False, soft_wrap=True)

    def task_finished(self, run: PipelineRun, stage: StageRun, task: TaskRun) -> None:
        """One line per result."""
        result = task.result
        detail = (result.error if result and result.error else
                  _short_value(result.value if result else None))
        self.console.print(f"  {escape(stage.stage.name)}/{escape(task.spec.name)} "
                           f"{task.state} in {format_seconds(task.seconds)}"
                           + (f": {escape(detail)}" if detail else ""), highlight=False,
                           soft_wrap=True)

    def stage_finished(self, run: PipelineRun, stage: StageRun) -> None:
        """Close a stage."""
        self.console.print(f"stage {escape(stage.stage.name)}: {stage.state} in "
                           f"{format_seconds(stage.seconds)}", highlight=False, soft_wrap=True)

    def pipeline_finished(self, run: PipelineRun) -> None:
        """The report."""
        self.console.print(render_report(run, verbose=self.verbose))


def make_display(console: Console, monitor: TaskMonitor | None = None, *,
                 verbose: bool = False) -> RunObserver:
    """``LiveDisplay`` on a terminal, ``PlainDisplay`` elsewhere; ``verbose`` adds the
    tracebacks of failed tasks to the report."""
    if console.is_terminal and not console.is_dumb_terminal:
        return LiveDisplay(console, monitor, verbose=verbose)
    return PlainDisplay(console, verbose=verbose)


def render_report(run: PipelineRun, *, verbose: bool = False) -> RenderableType:
    """The closing summary: a table of stage and task times, then the verdict (and, when
    ``verbose``, the traceback of each failed task)."""
    table = Table(title=f"pipeline {run.pipeline.name}", title_justify="left")
    table.add_column("stage / task", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("time", justify="right", no_wrap=True)
    table.add_column("log id", justify="right", style="dim", no_wrap=True)
    table.add_column("result", max_width=60)  # the one column that gives way when narrow
    for stage in run.stages:
        table.add_row(Text(stage.stage.name, style="bold"), _state_text(stage.state),
                      format_seconds(stage.seconds), "", "", end_section=False)
        if stage.state == "skipped":
            continue
        for task in stage.tasks:
            result = task.result
            table.add_row(f"  {task.spec.name}", _state_text(task.state),
                          format_seconds(task.seconds),
                          str(task.log_id) if task.log_id is not None else "",
                          _one_line(_short_value(result.value, 200) if result else ""))
    parts: list[RenderableType] = [table]
    failed = run.failed_stage
    if run.ok:
        parts.append(Text(f"pipeline {run.pipeline.name} succeeded in "
                          f"{format_seconds(run.seconds)}", style="bold green"))
    else:
        reason = "was interrupted" if run.interrupted else "failed"
        where = f" at stage {failed.stage.name!r}" if failed else ""
        parts.append(Text(f"pipeline {run.pipeline.name} {reason}{where} after "
                          f"{format_seconds(run.seconds)}", style="bold red"))
        hidden = False
        for task in failed.failed if failed else []:
            error = task.result.error if task.result and task.result.error else task.state
            parts.append(Text(f"  ✗ {task.spec.name}"
                              + (f" (log {task.log_id})" if task.log_id is not None else "")
                              + f": {error}", style="red"))
            details = task.result.error_details if task.result else None
            if details and verbose:
                parts.append(Text(textwrap.indent(details.rstrip(), "    "), style="dim"))
            hidden = hidden or bool(details and not verbose)
        if hidden:
            parts.append(Text("  sbroker run -v shows the tracebacks (ExecutionLog keeps"
                              " them in ErrorDetails)", style="dim"))
        skipped = [s.stage.name for s in run.stages if s.state == "skipped"]
        if skipped:
            parts.append(Text(f"  not run: {', '.join(skipped)}", style="dim"))
    return Group(*parts)
