"""The architecture check finds import cycles among the files of one folder, however the
import is hidden (under TYPE_CHECKING, inside a function), and passes the real package."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import archcheck


def _package(root: Path, files: dict[str, str]) -> Path:
    package = root / "pkg"
    for name, text in {"__init__.py": "", "engine/__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    return package


@pytest.mark.parametrize("hidden", [
    "from pkg.engine.a import A\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.engine.a import A\n",
    "def f():\n    from pkg.engine.a import A\n    return A\n",
    "def f():\n    from pkg.engine import a\n    return a\n",
    "def f():\n    from . import a\n    return a\n",
])
def test_a_cycle_in_one_folder_is_refused_however_it_is_imported(
        tmp_path: Path, hidden: str) -> None:
    package = _package(tmp_path, {
        "engine/a.py": "from pkg.engine.b import B\nclass A: ...\n",
        "engine/b.py": hidden + "class B: ...\n",
    })
    problems = archcheck.check(verbose=False, package=package)
    assert problems == ["import cycle in pkg/engine: pkg.engine.a -> pkg.engine.b"]


def test_a_cycle_across_folders_is_named_so(tmp_path: Path) -> None:
    package = _package(tmp_path, {
        "core/__init__.py": "",
        "core/c.py": "def f():\n    from pkg.engine.a import A\n    return A\n",
        "engine/a.py": "from pkg.core.c import f\nclass A: ...\n",
    })
    problems = archcheck.check(verbose=False, package=package)
    assert "import cycle across folders: pkg.core.c -> pkg.engine.a" in problems


def test_importing_a_module_of_ones_own_package_is_no_cycle(tmp_path: Path) -> None:
    package = _package(tmp_path, {
        "engine/__init__.py": "from pkg.engine.a import A\n",
        "engine/a.py": "from pkg.engine import b\nclass A: ...\n",
        "engine/b.py": "X = 1\n",
    })
    assert archcheck.check(verbose=False, package=package) == []


def test_sbroker_keeps_the_rules() -> None:
    assert archcheck.check(verbose=False) == []


@pytest.mark.parametrize("read", [
    "import time\ndef f():\n    return time.monotonic()\n",
    "import time\ndef f():\n    time.sleep(1)\n",
    "from time import sleep\n",
    "import datetime\ndef f():\n    return datetime.datetime.now()\n",
    "from datetime import datetime\ndef f():\n    return datetime.now()\n",
])
def test_reading_the_time_without_a_clock_is_refused_in_the_layers_that_have_one(
        tmp_path: Path, read: str) -> None:
    package = _package(tmp_path, {
        "core/__init__.py": "", "core/clock.py": "import time\nNOW = time.time\n",
        "engine/timed.py": read,
        "engine/clocked.py": "def f(clock):\n    clock.sleep(1)\n    return clock.monotonic()\n",
    })
    problems = archcheck.check(verbose=False, package=package)
    assert len(problems) == 1
    assert problems[0].startswith("pkg/engine/timed.py:")
    assert "reads the time or sleeps without a clock" in problems[0]


def test_reading_a_backend_flag_above_storage_is_refused(tmp_path: Path) -> None:
    package = _package(tmp_path, {
        "storage/__init__.py": "",
        "storage/store.py": "def f(conn):\n    return conn.serial_writer\n",
        "engine/send.py": "def g(conn):\n    return 1 if conn.serial_writer else 2\n",
    })
    problems = archcheck.check(verbose=False, package=package)
    assert len(problems) == 1
    assert problems[0].startswith("pkg/engine/send.py: reads a backend flag (serial_writer)")


def _function(name: str, lines: int, indent: str = "") -> str:
    """A function of exactly ``lines`` lines from its ``def`` to its end."""
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(lines - 2))
    return f"{indent}def {name}():\n{body}{indent}    return 0\n"


def test_a_function_over_sixty_lines_is_refused_and_sixty_pass(tmp_path: Path) -> None:
    package = _package(tmp_path, {
        "engine/a.py": _function("short", 60) + "class C:\n" + _function("long", 61, "    "),
    })
    problems = archcheck.check(verbose=False, package=package)
    assert problems == ["pkg/engine/a.py:C.long: 61 lines (at most 60): split it into"
                        " functions that each do one thing"]


def test_a_known_long_function_may_only_shrink(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archcheck, "KNOWN_LONG", {"pkg/engine/a.py:f": 70,
                                                  "pkg/engine/a.py:gone": 80})
    grown = _package(tmp_path / "grown", {"engine/a.py": _function("f", 71)})
    assert archcheck.check(verbose=False, package=grown) == [
        "pkg/engine/a.py:f: 71 lines, more than the 70 of KNOWN_LONG: it may only shrink",
        "pkg/engine/a.py:gone: no such function any more: drop it from KNOWN_LONG"]
    shrunk = _package(tmp_path / "shrunk", {"engine/a.py": _function("f", 65)
                                            + _function("gone", 80)})
    assert archcheck.check(verbose=False, package=shrunk) == [
        "pkg/engine/a.py:f: 65 lines, fewer than the 70 of KNOWN_LONG: lower it there"]
