"""Reading a pipeline file (TOML) into a ``Pipeline``, with errors that name the line.

Syntax errors come from ``tomllib`` (its message ends with "(at line L, column C)").
Semantic errors (a task with both ``sql`` and ``python``, an unknown key, a missing name...)
are found on the parsed data, which has no positions; ``_Locator`` finds the line again by
scanning the text for the offending table's header (``[[stage]]`` number i, then its
``[[stage.task]]`` number j, ...) and the key inside it, skipping multi-line strings. When the
data was written in a form it does not follow (inline tables), the error names the nearest
enclosing table it can find, or no line.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sbroker.apps.pipeline.intervals import RUN_CONTEXT, scheduled_for_of
from sbroker.apps.pipeline.model import (
    Options,
    Pipeline,
    Schedule,
    Stage,
    TaskSpec,
)
from sbroker.apps.pipeline.rules import (
    RETRY_KEYS,
    SCHEDULE_KEYS,
    check_graph,
    parse_lease,
    parse_retry,
    parse_schedule,
    parse_timeout,
)
from sbroker.apps.spark.config import DEFAULT_CONNECT_TIMEOUT, SparkConfig
from sbroker.apps.spark.tasks import PythonTask, SparkSQL, Task

__all__ = ["PipelineError", "coerce_param", "load_pipeline", "parse_param_overrides",
           "parse_pipeline"]

_PLACEHOLDER = re.compile(r"\$(\$?)\{([^}]*)\}")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\[\]]+?)\s*\]\]?\s*(#.*)?$")
_TOML_POS = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
Path_ = tuple[str | int, ...]


class PipelineError(ValueError):
    """A pipeline file that cannot be used; ``str()`` is one line ``file:line: message``."""

    def __init__(self, message: str, *, path: str | Path | None = None,
                 line: int | None = None, col: int | None = None) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.col = col
        where = self.path or "<pipeline>"
        if line is not None:
            where += f":{line}" + (f":{col}" if col is not None else "")
        super().__init__(f"{where}: {message}")


class _Locator:
    """Finds the line of a table or key of the parsed document in the source text."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.headers: list[tuple[int, str, bool]] = []  # (0-based line, dotted name, is array)
        in_string: str | None = None
        for number, line in enumerate(self.lines):
            if in_string is None:
                match = _HEADER.match(line)
                if match:
                    name = ".".join(p.strip().strip("\"'") for p in match.group(2).split("."))
                    self.headers.append((number, name, match.group(1) == "[["))
            for quote in ('"""', "'''"):
                if in_string in (None, quote) and line.count(quote) % 2 == 1:
                    in_string = None if in_string == quote else quote

    def _table(self, path: Path_) -> tuple[int, int, int] | None:
        """(header line, first line after, end line) of the table at ``path`` or None."""
        start, end, header = 0, len(self.lines), -1
        prefix = ""
        i = 0
        while i < len(path):
            name = prefix + str(path[i])
            index = path[i + 1] if i + 1 < len(path) and isinstance(path[i + 1], int) else None
            found = [h for h in self.headers if start <= h[0] < end and h[1] == name]
            if index is not None:
                found = [h for h in found if h[2]]
                if not isinstance(index, int) or index >= len(found):
                    return None
                chosen = found[index]
                i += 2
            else:
                if not found:
                    # an implicit super-table: [options.spark] without [options]
                    if any(start <= h[0] < end and h[1].startswith(name + ".")
                           for h in self.headers):
                        prefix = name + "."
                        i += 1
                        continue
                    return None
                chosen = found[0]
                i += 1
            header = chosen[0]
            start = header + 1
            end = next((h[0] for h in self.headers if h[0] > header and
                        (h[1] == name or not h[1].startswith(name + "."))), len(self.lines))
            prefix = name + "."
        own_end = next((h[0] for h in self.headers if h[0] > header), len(self.lines))
        return header, start if header >= 0 else 0, min(own_end, end)

    def line(self, path: Path_, key: str | None = None) -> int | None:
        """1-based line of ``key`` in the table at ``path`` (or of the table's header)."""
        cut = len(path)
        while cut >= 0:
            table = self._table(path[:cut])
            if table is not None:
                break
            cut -= 1
        if table is None:
            return None
        header, first, last = table
        if key is not None and cut == len(path):
            k = re.escape(key)
            pattern = re.compile(rf"""^\s*(?:{k}|"{k}"|'{k}')\s*[=.]""")
            for number in range(first, last):
                if pattern.match(self.lines[number]):
                    return number + 1
            sub_table = self._table((*path, key))  # `[stage.task.args]` rather than `args =`
            if sub_table is not None:
                return sub_table[0] + 1
        elif key is not None:  # written as dotted keys or inline: `spark.remote = ...`
            names = [str(p) for p in path[cut:] if isinstance(p, str)]
            for wanted in ([*names, key], names[:1]):
                joined = r"\s*\.\s*".join(re.escape(n) for n in wanted)
                pattern = re.compile(rf"^\s*{joined}\s*[=.]")
                for number in range(first, last):
                    if pattern.match(self.lines[number]):
                        return number + 1
        return header + 1 if header >= 0 else None

    def text_line(self, needle: str) -> int | None:
        """1-based line of the first occurrence of ``needle``."""
        for number, line in enumerate(self.lines):
            if needle in line:
                return number + 1
        return None


class _Parser:
    def __init__(self, text: str, path: str | Path | None, overrides: Mapping[str, str]) -> None:
        self.text = text
        self.path = path
        self.overrides = overrides
        self.locate = _Locator(text)
        self.params: dict[str, Any] = {}
        self.options = Options()

    def error(self, message: str, where: Path_ = (), key: str | None = None) -> PipelineError:
        return PipelineError(message, path=self.path, line=self.locate.line(where, key))

    def parse(self) -> Pipeline:
        try:
            doc = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as exc:
            raise self._syntax_error(exc) from None
        self._check_keys(doc, (), {"pipeline", "params", "options", "stage", "task",
                                   "schedule"})
        self.params = self._params(doc.get("params", {}))
        doc = {k: self._subst(v, (k,)) for k, v in doc.items() if k != "params"}
        head = self._table(doc, (), "pipeline")
        self._check_keys(head, ("pipeline",), {"name", "description"})
        default_name = Path(self.path).stem if self.path else "pipeline"
        name = self._string(head, ("pipeline",), "name", default_name)
        description = self._string(head, ("pipeline",), "description", "", empty_ok=True)
        self.options = options = self._options(self._table(doc, (), "options"))
        schedule = self._schedule(doc)
        scheduled_for = self._scheduled_for(schedule)
        if "task" in doc:
            if "stage" in doc:
                raise self.error("a pipeline lists [[task]] entries or [[stage]] entries, "
                                 "not both", (), "stage")
            tasks = self._top_tasks(doc["task"])
            return Pipeline(name, (), options, description, dict(self.params),
                            Path(self.path) if self.path is not None else None,
                            tasks, schedule, scheduled_for)
        stages_raw = doc.get("stage")
        if not isinstance(stages_raw, list) or not stages_raw:
            raise self.error("a pipeline needs [[task]] entries, or at least one [[stage]] "
                             "with [[stage.task]] entries", (),
                             "stage" if "stage" in doc else None)
        stages: list[Stage] = []
        for i, raw in enumerate(stages_raw):
            stages.append(self._stage(raw, i, {s.name for s in stages}))
        return Pipeline(name, tuple(stages), options, description, dict(self.params),
                        Path(self.path) if self.path is not None else None,
                        schedule=schedule, scheduled_for=scheduled_for)

    def _schedule(self, doc: Mapping[str, Any]) -> Schedule | None:
        if "schedule" not in doc:
            return None
        raw = self._table(doc, (), "schedule")
        self._check_keys(raw, ("schedule",), SCHEDULE_KEYS)
        return parse_schedule(raw, lambda msg, key: self.error(msg, ("schedule",), key))

    def _scheduled_for(self, schedule: Schedule | None) -> str | None:
        """``-p scheduled_for=T``: the time this run is for, in the schedule's timezone."""
        if "scheduled_date" in self.overrides:
            raise PipelineError("give -p scheduled_for=DATE_OR_TIME: scheduled_date is its "
                                "date", path=self.path)
        text = self.overrides.get("scheduled_for")
        if text is None:
            return None
        try:
            return scheduled_for_of(text, schedule.timezone if schedule else "UTC")
        except ValueError as exc:
            raise PipelineError(f"-p scheduled_for: {exc}", path=self.path) from None

    def _top_tasks(self, raw: Any) -> tuple[TaskSpec, ...]:
        if not isinstance(raw, list) or not raw:
            raise self.error("'task' must be an array of tables ([[task]] entries)", (), "task")
        tasks: list[TaskSpec] = []
        for i, task_raw in enumerate(raw):
            where: Path_ = ("task", i)
            if isinstance(task_raw, dict) and "name" not in task_raw:
                raise self.error(f"task {i + 1} needs a 'name'", where)
            tasks.append(self._task(task_raw, where, None, {t.name for t in tasks}))

        def graph_error(message: str, task: TaskSpec) -> PipelineError:
            key = "map" if task.map is not None and f"after {task.map!r}" in message else "after"
            return self.error(message, ("task", tasks.index(task)), key)

        check_graph(tasks, graph_error)
        return tuple(tasks)

    def _syntax_error(self, exc: tomllib.TOMLDecodeError) -> PipelineError:
        message = str(exc)
        line = getattr(exc, "lineno", None)
        col = getattr(exc, "colno", None)
        match = _TOML_POS.search(message)
        if match:
            line, col = line or int(match.group(1)), col or int(match.group(2))
            message = message[: match.start()]
        return PipelineError(f"invalid TOML: {message}", path=self.path, line=line, col=col)

    def _check_keys(self, table: Mapping[str, Any], where: Path_, allowed: set[str]) -> None:
        for key in table:
            if key not in allowed:
                raise self.error(f"unknown key {key!r}"
                                 + (f" in [{_dotted(where)}]" if where else "")
                                 + f" (expected one of: {', '.join(sorted(allowed))})",
                                 where, key)

    def _table(self, parent: Mapping[str, Any], where: Path_, key: str) -> dict[str, Any]:
        value = parent.get(key, {})
        if not isinstance(value, dict):
            raise self.error(f"{key!r} must be a table", where, key)
        return value

    def _string(self, table: Mapping[str, Any], where: Path_, key: str,
                default: str | None = None, *, empty_ok: bool = False) -> str:
        value = table.get(key, default)
        if not isinstance(value, str) or (not empty_ok and not value.strip()):
            raise self.error(f"{key!r} must be a non-empty string", where, key)
        return value

    def _params(self, raw: Any) -> dict[str, Any]:
        if not isinstance(raw, dict):
            raise self.error("[params] must be a table", (), "params")
        params: dict[str, Any] = {}
        for key, value in raw.items():
            if not _NAME.match(key) or not isinstance(value, str | int | float | bool):
                raise self.error(f"parameter {key!r} must be a name with a string, number or "
                                 "boolean value", ("params",), key)
            if key in RUN_CONTEXT:
                raise self.error(f"parameter {key!r} is the time the run is for: it cannot be"
                                 " declared in [params] (give -p scheduled_for=...)",
                                 ("params",), key)
            params[key] = value
        for key, text in self.overrides.items():
            if key in RUN_CONTEXT:
                continue
            if key not in params:
                known = ", ".join(sorted(params)) or "none"
                raise PipelineError(f"unknown parameter {key!r} (the file declares: {known})",
                                    path=self.path)
            params[key] = coerce_param(key, text, params[key], self.path)
        return params

    def _subst(self, value: Any, where: Path_) -> Any:
        if isinstance(value, dict):
            return {k: self._subst(v, where) for k, v in value.items()}
        if isinstance(value, list):
            return [self._subst(v, where) for v in value]
        if not isinstance(value, str) or "$" not in value:
            return value
        whole = _PLACEHOLDER.fullmatch(value)
        if whole and not whole.group(1) and whole.group(2) not in RUN_CONTEXT:
            return self._param(whole.group(2))
        return _PLACEHOLDER.sub(self._replace, value)

    def _replace(self, match: re.Match[str]) -> str:
        """One placeholder: a parameter's value, ``$${x}`` the text ``${x}``; the run's time
        (``${scheduled_for}``, ``${scheduled_date}``) is left for the runner to bind."""
        if match.group(2) in RUN_CONTEXT:
            return match.group(0)
        return "${" + match.group(2) + "}" if match.group(1) else str(self._param(match.group(2)))

    def _param(self, name: str) -> Any:
        if name not in self.params:
            line = self.locate.text_line("${" + name + "}")
            known = ", ".join(sorted(self.params)) or "none"
            raise PipelineError(f"undefined parameter ${{{name}}} (declared in [params]: "
                                f"{known})", path=self.path, line=line)
        return self.params[name]

    def _options(self, raw: dict[str, Any]) -> Options:
        where: Path_ = ("options",)
        self._check_keys(raw, where, {"concurrency", "spark", "spark_conf", "lease",
                                      *RETRY_KEYS})
        concurrency = raw.get("concurrency")
        if concurrency is not None and (type(concurrency) is not int or concurrency < 1):
            raise self.error("'concurrency' must be a positive integer", where, "concurrency")
        spark = self._table(raw, where, "spark")
        self._check_keys(spark, (*where, "spark"),
                         {"master", "remote", "app_name", "connect_timeout", "log_file"})
        for key in set(spark) - {"connect_timeout"}:
            self._string(spark, (*where, "spark"), key)
        timeout = spark.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise self.error("'connect_timeout' must be a number of seconds > 0",
                             (*where, "spark"), "connect_timeout")
        conf = self._table(raw, where, "spark_conf")
        for key, value in conf.items():
            if not isinstance(value, str | int | float | bool):
                raise self.error(f"spark_conf value of {key!r} must be a string, number or "
                                 "boolean", (*where, "spark_conf"), key)
        try:
            config = SparkConfig(master=spark.get("master"), remote=spark.get("remote"),
                                 conf=conf, app_name=spark.get("app_name", "sbroker"),
                                 connect_timeout=timeout, log_file=spark.get("log_file"))
        except ValueError as exc:
            raise self.error(str(exc), (*where, "spark"),
                             "remote" if "remote" in spark else "master") from None
        def error(msg: str, key: str | None) -> PipelineError:
            return self.error(msg, where, key)

        return Options(concurrency, config, parse_retry(raw, Options().retry, error),
                       parse_timeout(raw, None, error), parse_lease(raw, error))

    def _stage(self, raw: Any, i: int, taken: set[str]) -> Stage:
        where: Path_ = ("stage", i)
        if not isinstance(raw, dict):
            raise self.error(f"stage {i + 1} must be a table", (), "stage")
        self._check_keys(raw, where, {"name", "task"})
        name = self._string(raw, where, "name", f"stage{i + 1}")
        if name in taken:
            raise self.error(f"duplicate stage name {name!r}", where, "name")
        tasks_raw = raw.get("task")
        if not isinstance(tasks_raw, list) or not tasks_raw:
            raise self.error(f"stage {name!r} has no tasks (add [[stage.task]] entries)",
                             where, "task" if "task" in raw else None)
        tasks: list[TaskSpec] = []
        for j, task_raw in enumerate(tasks_raw):
            tasks.append(self._task(task_raw, (*where, "task", j), name,
                                    {t.name for t in tasks}))
        return Stage(name, tuple(tasks), self.locate.line(where))

    def _task(self, raw: Any, where: Path_, stage: str | None, taken: set[str]) -> TaskSpec:
        number = int(where[-1]) + 1
        of_stage = f" of stage {stage!r}" if stage is not None else ""
        if not isinstance(raw, dict):
            raise self.error(f"task {number}{of_stage} must be a table", where)
        keys = {"name", "sql", "python", "args", *RETRY_KEYS}
        self._check_keys(raw, where, keys if stage is not None else {*keys, "after", "map"})
        name = self._string(raw, where, "name", f"task{number}")
        label = f"task {name!r}{of_stage}"
        if name in taken:
            raise self.error(f"duplicate task name {name!r}"
                             + (f" in stage {stage!r}" if stage is not None else ""),
                             where, "name")
        if ("sql" in raw) == ("python" in raw):
            raise self.error(f"{label} needs exactly one of 'sql' or 'python'"
                             + (", not both" if "sql" in raw else ""), where,
                             "python" if "python" in raw else None)
        args = raw.get("args")
        task: Task
        try:
            if "sql" in raw:
                sql = self._string(raw, where, "sql")
                if args is not None and not isinstance(args, dict | list):
                    raise self.error(f"{label}: 'args' must be a table or an array", where,
                                     "args")
                task = SparkSQL(sql, args)
            else:
                target = self._string(raw, where, "python")
                if args is not None and not isinstance(args, dict):
                    raise self.error(f"{label}: 'args' of a python task must be a table",
                                     where, "args")
                task = PythonTask(target, **(args or {}))
        except (TypeError, ValueError) as exc:
            if isinstance(exc, PipelineError):
                raise
            culprit = ("args" if isinstance(exc, TypeError) and "args" in raw
                       else "python" if "python" in raw else "sql")
            raise self.error(f"{label}: {exc}", where, culprit) from None
        return self._task_spec(raw, where, name, task)

    def _task_spec(self, raw: dict[str, Any], where: Path_, name: str, task: Task) -> TaskSpec:
        def error(msg: str, key: str | None) -> PipelineError:
            return self.error(f"task {name!r}: {msg}", where, key)

        after = raw.get("after", [])
        if not isinstance(after, list) or not all(isinstance(a, str) for a in after):
            raise error("'after' must be a list of task names", "after")
        mapped = raw.get("map")
        if mapped is not None and (not isinstance(mapped, str) or not mapped):
            raise error("'map' must be the name of a task (it runs once per item of that "
                        "task's value, a list)", "map")
        if mapped is not None and isinstance(task, SparkSQL) and isinstance(task.args, list):
            raise error("a mapped SQL task binds its item as :item: its 'args' must be a "
                        "table, not an array", "args")
        if mapped is not None:
            after = [mapped, *after]  # a mapped task comes after the task it maps over
        if name in after:
            raise error("a task cannot come after itself",
                        "map" if name == mapped else "after")
        return TaskSpec(name, task, self.locate.line(where), tuple(dict.fromkeys(after)),
                        parse_retry(raw, self.options.retry, error),
                        parse_timeout(raw, self.options.timeout, error), mapped)


def _dotted(where: Path_) -> str:
    return ".".join(str(p) for p in where if isinstance(p, str))


def coerce_param(key: str, text: str, default: Any, path: str | Path | None) -> Any:
    """An override given as text takes the type of the parameter's default (a list or a
    table is given as JSON; with no default or ``None``, the text stays text)."""
    try:
        if isinstance(default, bool):
            if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(text)
            return text.lower() in ("true", "1", "yes")
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
        if isinstance(default, list | dict):
            value = json.loads(text)
            if not isinstance(value, type(default)):
                raise ValueError(text)
            return value
    except ValueError:
        kind = ("true or false" if isinstance(default, bool) else
                "an integer" if isinstance(default, int) else
                "a number" if isinstance(default, float) else
                f"a JSON {'list' if isinstance(default, list) else 'object'}")
        raise PipelineError(f"parameter {key!r} must be {kind}, got {text!r}",
                            path=path) from None
    return text


def parse_param_overrides(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``["out=/tmp/x", "rows=1000"]`` (the CLI's ``--param``) as a dict."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not _NAME.match(key.strip()):
            raise PipelineError(f"a parameter is given as name=value, not {item!r}")
        out[key.strip()] = value
    return out


def parse_pipeline(text: str, *, path: str | Path | None = None,
                   params: Mapping[str, str] | None = None) -> Pipeline:
    """Parse pipeline TOML ``text``; ``params`` override the file's ``[params]`` defaults."""
    return _Parser(text, path, params or {}).parse()


def load_pipeline(path: str | Path, params: Mapping[str, str] | None = None) -> Pipeline:
    """Read and parse a pipeline file; every problem is a one-line ``PipelineError``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PipelineError(f"cannot read the pipeline file: {exc}", path=path) from None
    return parse_pipeline(text, path=path, params=params)
