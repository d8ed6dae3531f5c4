"""Python pipelines found by name, and their tasks run by the executor (docs/pipelines.md).

``find_pipeline("FILE.py:ATTR" | "FILE.py" | "module:attr")`` imports the file (its folder
first on ``sys.path``, as ``python FILE.py`` would have it) or the module (the current folder
on ``sys.path``, as ``python -m`` would have it) and returns its ``sbroker.Pipeline``.
``call_task`` is what the executor calls for each attempt of a Python pipeline's task: it
finds the pipeline again (in this process, or by its source in another one), calls the
function and holds its value to the contract: a JSON value of at most 64 KiB.
``bind_inputs`` gives a TOML file's ``python =`` tasks the values of the tasks before them by
parameter name, as a Python pipeline's tasks get them.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import json
import math
import re
import sys
import traceback
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

from sbroker.apps.pipeline import model
from sbroker.apps.pipeline.model import CALL_TARGET, PIPELINE_KEY, TASK_KEY
from sbroker.apps.pipeline.parser import PipelineError, load_pipeline
from sbroker.apps.pipeline.python import Pipeline, registered
from sbroker.apps.pipeline.rules import SPARK, ancestors, classify_params
from sbroker.apps.pipeline.runner import pipeline_import_path
from sbroker.apps.spark.runner import MAX_VALUE_BYTES
from sbroker.apps.spark.tasks import PythonTask, resolve_target

__all__ = ["bind_inputs", "call_task", "check_targets", "check_value", "find_pipeline",
           "is_python_target", "load_definition", "load_python_pipeline"]

_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
MEMORY = "memory:"  # the source of a pipeline no other process can import (python.py)


def is_python_target(text: str) -> bool:
    """True when ``sbroker run`` names a Python pipeline (``FILE.py:ATTR``, ``FILE.py``,
    ``module:attr``) rather than a TOML file."""
    base, sep, attr = text.rpartition(":")
    if (sep and base.endswith(".py")) or text.endswith(".py"):
        return True
    return bool(sep and _MODULE.match(base) and _MODULE.match(attr)
                and not Path(text).exists())


def load_definition(target: str | Path, params: Mapping[str, Any] | None = None, *,
                    typed: bool = False, strict: bool = True) -> model.Pipeline:
    """The pipeline ``sbroker run`` (a schedule, a server taking a run over) was given: a
    Python pipeline (``FILE.py:ATTR``, ``module:attr``) or a TOML file, whose ``python =``
    tasks get the values they take (``bind_inputs``). ``params`` are text (``-p``), or with
    ``typed`` the values a run recorded. ``strict``: every ``python =`` target must import
    here (one line and nothing run otherwise); a schedule's tick or a backfill is not
    dropped for that: its run is recorded and such a task fails when it runs."""
    if is_python_target(str(target)):
        return find_pipeline(str(target)).definition(params, text=not typed)
    text = {k: ("true" if v else "false") if isinstance(v, bool) else str(v)
            for k, v in (params or {}).items()}
    pipeline = load_pipeline(target, text)
    with pipeline_import_path(pipeline):
        if strict:
            check_targets(pipeline)
        return bind_inputs(pipeline, strict=strict)


def load_python_pipeline(target: str, params: Mapping[str, str] | None = None
                         ) -> model.Pipeline:
    """The model of the Python pipeline ``target``, its parameters set from ``params``
    (text, as ``-p NAME=VALUE`` gives them); every problem is a one-line PipelineError."""
    return find_pipeline(target).definition(params, text=True)


def find_pipeline(target: str) -> Pipeline:
    """The ``sbroker.Pipeline`` that ``target`` names; its ``source`` says how to find it
    again (a file by its absolute path)."""
    if target.startswith(MEMORY):
        raise PipelineError(f"pipeline {target[len(MEMORY):].rpartition(':')[0]!r} was "
                            "defined inside a function: only the process that defined it can"
                            " run it (define it at a module's top level)")
    base, sep, attr = target.rpartition(":")
    if not sep:
        base, attr = target, ""
    if base.endswith(".py"):
        path = Path(base).resolve()
        module = _import_file(path)
        where = str(path)
    else:
        module = _import_module(base)
        where = base
    pipe = _pipeline_of(module, attr, target)
    pipe.source = f"{where}:{attr or _attr_of(module, pipe)}"
    return pipe


def _import_file(path: Path) -> ModuleType:
    """The module of a pipeline file: imported once per process under its stem (or, when
    another module has that name, a name of its own), its folder first on ``sys.path``."""
    if not path.is_file():
        raise PipelineError("no such file", path=path)
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = path.stem
    existing = sys.modules.get(name)
    if existing is not None and _file_of(existing) != path:
        name = f"_sbroker_{path.stem}_{hashlib.sha256(folder.encode()).hexdigest()[:8]}"
        existing = sys.modules.get(name)
    if existing is not None:
        return existing
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PipelineError("cannot import it as Python", path=path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[name]
        raise _import_error(exc, path) from None
    return module


def _import_module(name: str) -> ModuleType:
    if not _MODULE.match(name):
        raise PipelineError(f"{name!r} is not a module name (give FILE.py:ATTR or "
                            "module:attr)")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name.startswith(exc.name):
            raise PipelineError(f"no module named {exc.name!r} (from the current folder or "
                                "the installed packages)") from None
        raise _import_error(exc, None) from None
    except BaseException as exc:
        raise _import_error(exc, None) from None


def _import_error(exc: BaseException, path: Path | None) -> BaseException:
    """A failed import as one line at the user's line that failed (a KeyboardInterrupt or
    a definition error as it is)."""
    if isinstance(exc, PipelineError | KeyboardInterrupt | SystemExit):
        return exc
    if isinstance(exc, SyntaxError):
        return PipelineError(f"cannot import it: SyntaxError: {exc.msg}",
                             path=exc.filename or path, line=exc.lineno)
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if "importlib" not in f.filename] or frames
    where = own[-1] if own else None
    first = (str(exc).strip().splitlines() or [""])[0]
    return PipelineError(f"cannot import it: {type(exc).__name__}: {first}".rstrip(": "),
                         path=where.filename if where else path,
                         line=where.lineno if where else None)


def _file_of(module: ModuleType) -> Path | None:
    file = getattr(module, "__file__", None)
    return Path(file).resolve() if file else None


def _pipeline_of(module: ModuleType, attr: str, target: str) -> Pipeline:
    found = {k: v for k, v in vars(module).items() if isinstance(v, Pipeline)}
    where = _file_of(module)
    if not attr:
        if len(found) != 1:
            have = ", ".join(sorted(found)) or "none"
            raise PipelineError(f"name the pipeline as {target}:ATTR (sbroker.Pipeline "
                                f"objects here: {have})", path=where)
        return next(iter(found.values()))
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            have = ", ".join(sorted(found)) or "none"
            raise PipelineError(f"{module.__name__} has no attribute {attr!r} "
                                f"(sbroker.Pipeline objects here: {have})", path=where)
        obj = getattr(obj, part)
    if not isinstance(obj, Pipeline):
        raise PipelineError(f"{attr} is a {type(obj).__name__}, not an sbroker.Pipeline",
                            path=where)
    return obj


def _attr_of(module: ModuleType, pipe: Pipeline) -> str:
    return next(k for k, v in vars(module).items() if v is pipe)


def check_targets(pipeline: model.Pipeline) -> None:
    """Import every ``python =`` target now, so a typo fails before any Spark work."""
    for spec in pipeline.dag:
        if isinstance(spec.task, PythonTask):
            stage, _, name = spec.name.rpartition("/")
            where = f"task {name!r}" + (f" of stage {stage!r}" if stage else "")
            try:
                resolve_target(spec.task.target)
            except (ImportError, AttributeError, TypeError) as exc:
                raise PipelineError(
                    f"{where}: cannot use {spec.task.target!r}: {exc}", path=pipeline.path,
                    line=spec.line) from None


# -- in the executor -------------------------------------------------------------------------
def call_task(spark: Any, /, **kwargs: Any) -> Any:
    """One attempt of a Python pipeline's task: ``kwargs`` name the pipeline's source and
    the task, and carry its parameters and the values of the tasks before it."""
    source, name = kwargs.pop(PIPELINE_KEY), kwargs.pop(TASK_KEY)
    pipe = registered(source) or find_pipeline(source)
    task = pipe.tasks.get(name)
    if task is None:
        raise LookupError(f"pipeline {pipe.name!r} ({source}) has no task {name!r} now")
    if task.takes_spark:
        kwargs[SPARK] = spark
    return check_value(name, task.function(**kwargs))


def check_value(task: str, value: Any) -> Any:
    """``value`` as the next task will see it (JSON, at most 64 KiB), or one line saying
    why it cannot be a value."""
    bad = _not_json(value, 0)
    if bad is not None:
        held = "" if bad is value else f" holding {_kind(bad)}"
        raise TypeError(f"task {task!r} returned {_kind(value)}{held}, which is not a JSON "
                        "value: return numbers, text, lists and dicts (for data, write a "
                        "table and return its path)")
    text = json.dumps(value, allow_nan=False)
    size = len(text.encode("utf-8"))
    if size > MAX_VALUE_BYTES:
        raise ValueError(f"task {task!r} returned {size / 1024:.0f} KiB of JSON, over the "
                         f"{MAX_VALUE_BYTES // 1024} KiB a value may have: write the data to "
                         "a table and return its path")
    return json.loads(text)


def _not_json(value: Any, depth: int) -> Any:
    """The first part of ``value`` that JSON cannot carry, or None."""
    if depth > 100:
        return value
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else value
    if isinstance(value, list | tuple):
        return next((b for b in (_not_json(v, depth + 1) for v in value) if b is not None),
                    None)
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str | int | float | bool) and key is not None:
                return key
            bad = _not_json(item, depth + 1)
            if bad is not None:
                return bad
        return None
    return value


def _kind(value: Any) -> str:
    if isinstance(value, float):
        return f"the float {value}"
    kind = type(value)
    name = kind.__qualname__ if kind.__module__ == "builtins" else (
        f"{kind.__module__}.{kind.__qualname__}")
    return f"a {name}"


# -- TOML tasks ------------------------------------------------------------------------------
def bind_inputs(pipeline: model.Pipeline, *, strict: bool = True) -> model.Pipeline:
    """``pipeline`` with each ``python =`` task's ``inputs``: the parameters of its function
    (after the first, the session) that its ``args`` do not set and that name a task it
    comes after, ``item`` (mapped tasks) or the run's ``scheduled_for`` / ``scheduled_date``;
    a parameter nothing gives is a one-line error. The targets must import (check_targets),
    unless not ``strict``: a target that does not import then takes nothing."""
    dag = pipeline.dag
    if not pipeline.tasks:
        return pipeline
    before = ancestors(dag)
    names = {t.name for t in dag}
    tasks = []
    for spec in dag:
        task = spec.task
        if not isinstance(task, PythonTask) or task.target == CALL_TARGET:
            tasks.append(spec)
            continue
        try:
            params = _toml_params(resolve_target(task.target))
        except (ImportError, AttributeError, TypeError):
            if strict:
                raise
            tasks.append(spec)  # it fails when it runs, saying why
            continue
        inputs, _, problem = classify_params(spec.name, params, mapped=spec.map is not None,
                                             before=before[spec.name], tasks=names,
                                             given=task.kwargs.keys())
        if problem is not None:
            raise PipelineError(f"{problem} ({task.target})", path=pipeline.path,
                                line=spec.line)
        tasks.append(replace(spec, inputs=inputs))
    return replace(pipeline, tasks=tuple(tasks))


def _toml_params(function: Any) -> tuple[tuple[str, bool], ...]:
    """A ``python =`` function's parameters by name (the first takes the session)."""
    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return ()
    named = [p for p in params[1:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return tuple((p.name, p.default is not p.empty) for p in named)
