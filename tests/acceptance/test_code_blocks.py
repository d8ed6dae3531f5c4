"""Every code block of the README and of docs/ runs, as a reader would run it.

Per page, in a fresh temporary folder and a process of its own, in the order of the page, and
then once more in the same folder (a reader runs an example again: what the first run made
must not get in its way):
- a ```python block runs (the blocks of one page share their names, like a session);
- a block whose first line is ``# file: NAME`` is written to NAME instead (a module of
  tasks, a pipeline file) for the blocks after it to use;
- in a ```sh block, each line that starts with ``sbroker `` runs and must exit 0; other lines
  (``make ...``) are not run here (the Makefile's own targets are the suite itself).
A block or an sbroker line marked ``# not run: WHY`` is skipped, and must say why; an sbroker
line marked ``# first run only: WHY`` (a step that can be done once, like re-driving one
record) is skipped in the second run, and must say why too. A page
that starts Spark carries ``<!-- docs test: spark -->`` and runs with the Spark tests. A page
marked ``<!-- docs test: once: WHY -->`` runs only the first time, and must say why (a test
of its own runs the same thing again).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
NOT_RUN = re.compile(r"#\s*not run:\s*(.*)$")
ONCE = re.compile(r"#\s*first run only:\s*(.*)$")
SPARK_PAGE = "<!-- docs test: spark -->"
ONCE_PAGE = re.compile(r"<!-- docs test: once:(.*?)-->")


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, text, and the line it starts on."""

    lang: str
    text: str
    line: int

    @property
    def skipped_because(self) -> str | None:
        first = self.text.split("\n", 1)[0]
        match = NOT_RUN.search(first)
        return match.group(1).strip() if match else None

    @property
    def file_name(self) -> str | None:
        first = self.text.split("\n", 1)[0]
        match = re.match(r"#\s*file:\s*(\S+)", first)
        return match.group(1) if match else None


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    return [Block(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1)
            for m in FENCE.finditer(text)]


def driver(page: Path, *, again: bool = False) -> str:
    """A script that runs the page's blocks in order (see the module docstring); ``again``:
    for the second run in the same folder."""
    steps: list[str] = []
    for block in blocks(page):
        where = f"{page.relative_to(ROOT)}:{block.line}"
        if block.skipped_because is not None:
            assert block.skipped_because, f"{where}: '# not run:' must say why"
            continue
        if block.file_name is not None:
            steps.append(f"Path({block.file_name!r}).write_text({block.text!r})")
        elif block.lang == "python":
            steps.append(f"run_python({block.text!r}, {where!r})")
        elif block.lang == "sh":
            for number, line in enumerate(block.text.splitlines()):
                command = line.split(" #", 1)[0].strip()
                if not command.startswith("sbroker "):
                    continue
                marker = NOT_RUN.search(line)
                if marker is not None:
                    assert marker.group(1).strip(), f"{where}: '# not run:' must say why"
                    continue
                once = ONCE.search(line)
                if once is not None:
                    assert once.group(1).strip(), f"{where}: '# first run only:' must say why"
                    if again:
                        continue
                steps.append(f"run_sh({command!r}, '{page.relative_to(ROOT)}:"
                             f"{block.line + number + 1}')")
    return textwrap.dedent("""\
        import os, shlex, subprocess, sys
        from pathlib import Path
        sys.path.insert(0, os.getcwd())  # modules written by '# file:' blocks
        NAMESPACE = {"__name__": "__main__"}

        def run_python(source, where):
            print(f"--- {where}", flush=True)
            exec(compile(source, where, "exec"), NAMESPACE)

        def run_sh(command, where):
            print(f"--- {where}: {command}", flush=True)
            args = [sys.executable, "-m", "sbroker.cli", *shlex.split(command)[1:]]
            done = subprocess.run(args, capture_output=True, text=True)
            print(done.stdout, done.stderr, flush=True)
            if done.returncode != 0:
                raise SystemExit(f"{where}: {command!r} exited {done.returncode}")
        """) + "\n".join(steps) + "\n"


def _params() -> list[object]:
    out = []
    for page in PAGES:
        marks = [pytest.mark.spark, pytest.mark.slow] if SPARK_PAGE in page.read_text() else []
        out.append(pytest.param(page, id=str(page.relative_to(ROOT)), marks=marks))
    return out


@pytest.mark.parametrize("page", _params())
def test_every_code_block_of_the_page_runs(page: Path, tmp_path: Path) -> None:
    scripts = {}
    for again in (False, True):
        scripts[again] = tmp_path / f"_page{'_again' if again else ''}.py"
        scripts[again].write_text(driver(page, again=again))
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # pages refer to the examples
    env = dict(os.environ, PYTHONUNBUFFERED="1", SBROKER_DB="")
    env.pop("SBROKER_DB")
    once = ONCE_PAGE.search(page.read_text())
    assert once is None or len(once.group(1).strip()) > 10, f"{page}: 'once:' must say why"
    runs = ((False, "the first time"), (True, "again, in the same folder"))
    for again, run in runs[:1] if once else runs:
        done = subprocess.run([sys.executable, str(scripts[again])], cwd=tmp_path,
                              capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, (run, done.stdout[-6000:], done.stderr[-6000:])


def test_a_block_that_is_not_run_says_why() -> None:
    for page in PAGES:
        for block in blocks(page):
            if block.skipped_because is not None:
                assert len(block.skipped_because) > 10, (page, block.line)
