"""The architecture check: prints sbroker's import graph by layer and fails on a broken rule.

Rules (docs/design.md says why):
- each folder is a layer and imports only its own layer and the layers below it
  (core < protocol < storage < engine < services < apps < the root modules < cli): the root
  modules are the composition root ``broker.py`` and the public names (``__init__``,
  ``spark``, ``poison``), which the command line opens brokers with;
- no import cycle at all, across folders or among the files of one folder, counting imports
  under ``TYPE_CHECKING`` and inside functions;
- only ``storage/sqlite/`` imports ``sqlite3``, only ``storage/postgres/`` imports psycopg;
- no code above ``storage/`` reads a backend flag (``serial_writer``): what a backend does
  differently is its own implementation of a port (``storage/ports.py``), chosen when the
  store is built; KNOWN_FLAG_READS is empty;
- ``storage/``, ``engine/`` and ``services/`` read the time and sleep only through a clock
  (``core/clock.py``): no ``time.monotonic()``, ``time.time()``, ``time.sleep()``,
  ``datetime.now()`` there (real time on purpose is ``SYSTEM_CLOCK``, said so);
- no module is over MAX_LINES lines, and no function or method over MAX_FUNCTION_LINES (from
  its ``def`` to its end); KNOWN_LONG is empty and must stay so.

Run: ``python -m tools.archcheck`` (``-q``: only the verdict and the violations).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from collections.abc import Collection, Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "sbroker"
LAYERS = ("core", "protocol", "storage", "engine", "services", "apps", "root", "cli")
ROOT_LAYER = LAYERS.index("root")  # sbroker/__init__.py, broker.py, the public re-exports
MAX_LINES = 600
DRIVERS = {"sqlite3": "storage/sqlite", "psycopg": "storage/postgres",
           "psycopg_pool": "storage/postgres"}
BACKEND_FLAGS = frozenset({"serial_writer"})
# Reads left from before a port took them (issue 39 emptied it): may only shrink, so no entry
# may be added; a new read above storage/ is refused.
KNOWN_FLAG_READS: dict[str, int] = {}
STORAGE_LAYER = LAYERS.index("storage")
MAX_FUNCTION_LINES = 60
KNOWN_LONG: dict[str, int] = {}
CLOCKED_LAYERS = {LAYERS.index(name) for name in ("storage", "engine", "services")}
TIME_READS = {"time": {"time", "monotonic", "sleep", "perf_counter", "time_ns", "monotonic_ns"},
              "datetime": {"now", "utcnow", "today"}}


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    return ROOT_LAYER


def folder_of(module: str, is_package: bool) -> str:
    parts = module.split(".")
    return "/".join(parts if is_package else parts[:-1])


def imports(path: Path, module: str, is_package: bool,
            modules: Collection[str] = ()) -> Iterator[tuple[str, int]]:
    """(imported module or name, line) for every import in the file, wherever it stands.
    ``from pkg import sub`` names the module ``pkg.sub`` when it is one of ``modules``, not
    ``pkg`` (which Python has loaded before any of its modules anyway)."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    base = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                target = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            names = [f"{target}.{alias.name}" for alias in node.names]
            submodules = [name for name in names if name in modules]
            if len(submodules) < len(names):  # some names are the module's own
                yield target, node.lineno
            for name in submodules:
                yield name, node.lineno


def flag_reads(path: Path) -> int:
    """How many times the file reads an attribute named like a backend flag."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    return sum(isinstance(node, ast.Attribute) and node.attr in BACKEND_FLAGS
               for node in ast.walk(tree))


def time_reads(path: Path) -> list[int]:
    """Lines that read the time or sleep without a clock: ``time.monotonic()``,
    ``datetime.datetime.now()``, ``from time import sleep``..."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            base = node.value
            name = base.id if isinstance(base, ast.Name) else \
                base.attr if isinstance(base, ast.Attribute) else ""
            if node.attr in TIME_READS.get(name, ()):
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module in TIME_READS and any(
                alias.name in TIME_READS[node.module] for alias in node.names):
            lines.append(node.lineno)
    return lines


def _flag_problem(rel: Path, reads: int) -> str | None:
    known = KNOWN_FLAG_READS.get(str(rel), 0)
    if reads > known:
        return (f"{rel}: reads a backend flag ({', '.join(sorted(BACKEND_FLAGS))}) {reads} "
                f"time(s), {known} known: choose the backend's way in a storage port")
    if reads < known:
        return f"{rel}: reads a backend flag {reads} time(s), fewer than the {known} of " \
               "KNOWN_FLAG_READS: lower it there"
    return None


def function_lengths(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(dotted name, lines from ``def`` to the end) of every function, method and nested
    function in ``tree``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = prefix + node.name
            yield name, (node.end_lineno or node.lineno) - node.lineno + 1
            yield from function_lengths(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from function_lengths(node, prefix + node.name + ".")
        else:
            yield from function_lengths(node, prefix)


def _length_problems(rel: Path, tree: ast.AST) -> Iterator[str]:
    seen: set[str] = set()
    for name, lines in function_lengths(tree):
        key = f"{rel}:{name}"
        seen.add(key)
        known = KNOWN_LONG.get(key, MAX_FUNCTION_LINES)
        if lines > known:
            yield (f"{key}: {lines} lines, more than the {known} of KNOWN_LONG: it may only"
                   " shrink" if key in KNOWN_LONG else
                   f"{key}: {lines} lines (at most {MAX_FUNCTION_LINES}): split it into"
                   " functions that each do one thing")
        elif key in KNOWN_LONG and lines < known:
            yield (f"{key}: {lines} lines, fewer than the {known} of KNOWN_LONG: "
                   + ("lower it there" if lines > MAX_FUNCTION_LINES else "drop it from there"))
    for key in KNOWN_LONG:
        if key.startswith(f"{rel}:") and key not in seen:
            yield f"{key}: no such function any more: drop it from KNOWN_LONG"


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def check(verbose: bool = True, package: Path = PACKAGE) -> list[str]:
    """The violations of the rules in ``package`` (sbroker unless a test gives another)."""
    files = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    packages = {m for m, p in files.items() if p.name == "__init__.py"}
    graph: dict[str, set[str]] = defaultdict(set)
    problems: list[str] = []
    for module, path in files.items():
        graph[module]
        rel = path.relative_to(package.parent)
        text = path.read_text("utf-8")
        lines = len(text.splitlines())
        if lines > MAX_LINES:
            problems.append(f"{rel}: {lines} lines (at most {MAX_LINES})")
        problems += _length_problems(rel, ast.parse(text, str(path)))
        if layer_of(module) > STORAGE_LAYER:
            flagged = _flag_problem(rel, flag_reads(path))
            if flagged is not None:
                problems.append(flagged)
        if layer_of(module) in CLOCKED_LAYERS:
            problems += [f"{rel}:{line}: reads the time or sleeps without a clock (take a "
                         "core.clock.Clock; SYSTEM_CLOCK for real time on purpose)"
                         for line in time_reads(path)]
        for target, line in imports(path, module, module in packages, files):
            top = target.split(".")[0]
            if top in DRIVERS and not str(rel.parent).startswith(
                    f"{package.name}/{DRIVERS[top]}"):
                problems.append(f"{rel}:{line}: imports {top} (only {DRIVERS[top]}/ may)")
            if target not in files or target == module:
                continue
            graph[module].add(target)
            if layer_of(target) > layer_of(module):
                problems.append(
                    f"{rel}:{line}: {module} ({_layer_name(layer_of(module))}) imports "
                    f"{target} ({_layer_name(layer_of(target))}), a layer above it")
    for component in strongly_connected(graph):
        folders = {folder_of(m, m in packages) for m in component}
        where = "across folders" if len(folders) > 1 else f"in {folders.pop()}"
        problems.append(f"import cycle {where}: " + " -> ".join(component))
    if verbose:
        _print_graph(graph)
    return problems


def _layer_name(layer: int) -> str:
    return LAYERS[layer]


def _print_graph(graph: dict[str, set[str]]) -> None:
    by_layer: dict[int, list[str]] = defaultdict(list)
    for module in graph:
        by_layer[layer_of(module)].append(module)
    for layer in sorted(by_layer):
        print(f"[{_layer_name(layer)}]")
        for module in sorted(by_layer[layer]):
            deps = sorted(d.removeprefix("sbroker.") for d in graph[module])
            print(f"  {module.removeprefix('sbroker.')} -> {', '.join(deps) or '-'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.archcheck", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-q", "--quiet", action="store_true", help="no graph, only the verdict")
    args = parser.parse_args(argv)
    problems = check(verbose=not args.quiet)
    for problem in problems:
        print(f"archcheck: {problem}", file=sys.stderr)
    print(f"archcheck: {'FAILED, ' + str(len(problems)) + ' problem(s)' if problems else 'ok'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
