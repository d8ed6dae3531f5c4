"""``sbroker run FILE.py:ATTR`` / ``module:attr`` and ``sbroker schedule add FILE.py:ATTR``
as a user runs them (docs/pipelines.md): exit codes, a bad definition as one line naming the
function's file and line with nothing run, resume, and the runs' JSON. No task touches Spark,
so no JVM starts."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from sbroker.cli.main import main

pytestmark = pytest.mark.usefixtures("own_imports")

FLOW = '''
import pathlib
import sbroker

pipe = sbroker.Pipeline("shop", retry_delay="10ms", schedule=sbroker.Every("15m"))
HERE = pathlib.Path(__file__).parent


@pipe.task()
def days(spark, month="2026-11"):
    return [f"{month}-{d:02d}" for d in range(1, 4)]


@pipe.task(map=days)
def load(spark, item):
    if (HERE / item).exists():
        raise RuntimeError(f"no data for {item}")
    return int(item[-2:]) * 10


@pipe.task(after=[load])
def total(load, days):
    return {"days": len(days), "sum": sum(load)}
'''




def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner(mix_stderr=False).invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def flow(folder: Path, text: str = FLOW, name: str = "shop_cli.py") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def test_run_a_python_pipeline_and_show_it(tmp_path: Path) -> None:
    db, path = str(tmp_path / "runs.db"), flow(tmp_path)
    code, out, err = cli("--db", db, "run", f"{path}:pipe", "-p", "month=2027-02")
    assert code == 0, err
    assert "load[2]" in out and "pipeline shop succeeded" in out
    code, out, _ = cli("--db", db, "runs", "show", "1", "--json")
    shown = json.loads(out)
    assert [t["name"] for t in shown["tasks"]] == ["days", "load", "load[0]", "load[1]",
                                                    "load[2]", "total"]
    values = {t["name"]: t["value"] for t in shown["tasks"]}
    assert values["load"] == [10, 20, 30] and values["total"] == {"days": 3, "sum": 60}
    assert values["days"] == ["2027-02-01", "2027-02-02", "2027-02-03"]


def test_a_failed_item_fails_the_run_and_a_resume_runs_it_alone(tmp_path: Path) -> None:
    db, path = str(tmp_path / "runs.db"), flow(tmp_path)
    (tmp_path / "2026-11-02").touch()
    code, _, _ = cli("--db", db, "run", f"{path}:pipe")
    assert code == 1
    _, out, _ = cli("--db", db, "runs", "show", "1", "--json")
    status = {t["name"]: (t["status"], t["attempts"]) for t in json.loads(out)["tasks"]}
    assert status == {"days": ("succeeded", 1), "load": ("failed", 0),
                      "load[0]": ("succeeded", 1), "load[1]": ("failed", 1),
                      "load[2]": ("succeeded", 1), "total": ("skipped", 0)}
    (tmp_path / "2026-11-02").unlink()
    code, _, err = cli("--db", db, "run", str(path), "--resume")  # FILE.py: its only pipeline
    assert code == 0, err
    _, out, _ = cli("--db", db, "runs", "show", "1", "--json")
    status = {t["name"]: (t["status"], t["attempts"]) for t in json.loads(out)["tasks"]}
    assert status["load[0]"] == ("succeeded", 1) and status["load[1]"] == ("succeeded", 2)
    assert status["total"] == ("succeeded", 1)


def test_a_module_and_attribute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flow(tmp_path, name="shop_module_cli.py")
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("--db", "runs.db", "run", "shop_module_cli:pipe")
    assert code == 0, err and "pipeline shop succeeded" in out


def test_a_mapped_task_over_what_is_not_a_list(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    path = flow(tmp_path, FLOW.replace('return [f"{month}-{d:02d}" for d in range(1, 4)]',
                                       'return {"month": month}'))
    code, _, _ = cli("--db", db, "run", f"{path}:pipe")
    assert code == 1
    _, out, _ = cli("--db", db, "runs", "show", "1", "--json")
    errors = {t["name"]: t["error"] for t in json.loads(out)["tasks"]}
    assert errors["load"] == "task 'load' maps over 'days', whose value is dict, not a list"


@pytest.mark.parametrize(("text", "line", "message"), [
    ("@pipe.task(after='b')\ndef a():\n    pass\n\n@pipe.task(after='a')\ndef b():\n    pass\n",
     4, "the tasks' 'after' make a cycle: a -> b -> a"),
    ("@pipe.task(after=['nope'])\ndef a():\n    pass\n", 4,
     "task 'a' comes after 'nope', which is not a task of pipeline 'p'"),
    ("@pipe.task()\ndef a():\n    pass\n\n@pipe.task(name='a')\ndef b():\n    pass\n", 8,
     "duplicate task name 'a'"),
    ("@pipe.task()\ndef a(spark, rows):\n    pass\n", 4,
     "task 'a' takes a parameter 'rows' that is neither 'spark', 'item' (mapped tasks), a "
     "task it comes after, nor has a default"),
    ("@pipe.task()\ndef a(item):\n    pass\n", 4,
     "task 'a' takes 'item', which only a mapped task gets (map=TASK)"),
    ("@pipe.task()\ndef b():\n    pass\n\n@pipe.task()\ndef a(spark, b):\n    pass\n", 8,
     "task 'a' takes a parameter 'b', named after a task it does not come after"),
])
def test_a_bad_definition_is_one_line_naming_file_and_line(tmp_path: Path, text: str,
                                                           line: int, message: str) -> None:
    db = str(tmp_path / "runs.db")
    path = flow(tmp_path, "import sbroker\npipe = sbroker.Pipeline('p')\n\n" + text,
                name="bad_cli.py")
    code, out, err = cli("--db", db, "run", f"{path}:pipe")
    assert code == 2, out
    assert err.startswith(f"sbroker: error: {path}:{line}: {message}")
    assert err.count("\n") == 1
    assert not Path(db).exists()  # nothing run, not even a database made


@pytest.mark.parametrize(("target", "message"), [
    ("missing_cli.py:pipe", "missing_cli.py: no such file"),
    ("shop_cli.py:nope", "shop_cli has no attribute 'nope'"),
    ("shop_cli.py:pipe -p colour=red", "unknown parameter 'colour' (pipeline 'shop' has: "
                                       "month)"),
    ("shop_cli.py:pipe -p month", "a parameter is given as name=value"),
])
def test_what_cannot_be_run_is_one_line(tmp_path: Path, target: str, message: str) -> None:
    flow(tmp_path)
    first, *rest = target.split()
    code, _, err = cli("--db", str(tmp_path / "runs.db"), "run", str(tmp_path / first), *rest)
    assert code == 2 and message in err and err.count("\n") == 1


def test_schedule_a_python_pipeline(tmp_path: Path) -> None:
    db, path = str(tmp_path / "runs.db"), flow(tmp_path)
    code, out, err = cli("--db", db, "schedule", "add", f"{path}:pipe", "-p", "month=2027-03")
    assert code == 0, err and out.startswith("schedule shop added")
    _, out, _ = cli("--db", db, "schedule", "list", "--json")
    [row] = json.loads(out)
    assert (row["name"], row["file"], row["every"], row["params"]) == (
        "shop", f"{path.resolve()}:pipe", 900.0, {"month": "2027-03"})


DAILY = '''
import sbroker

pipe = sbroker.Pipeline("daily_py", schedule=sbroker.Cron("0 2 * * *"))


@pipe.task()
def day(scheduled_date, scheduled_for):
    return [scheduled_date, scheduled_for]
'''


def test_a_python_pipelines_schedule_backfills_its_ticks(tmp_path: Path) -> None:
    db, path = str(tmp_path / "runs.db"), flow(tmp_path, DAILY, name="daily_cli.py")
    assert cli("--db", db, "schedule", "add", f"{path}:pipe")[0] == 0
    code, out, err = cli("--db", db, "schedule", "backfill", "daily_py", "--from",
                         "2026-01-01", "--to", "2026-01-03")
    assert code == 0, (out, err)
    _, out, _ = cli("--db", db, "runs", "--json")
    values = []
    for run in sorted(json.loads(out), key=lambda r: r["scheduled_for"]):
        _, shown, _ = cli("--db", db, "runs", "show", str(run["run_id"]), "--json")
        values.append(json.loads(shown)["tasks"][0]["value"])
    assert values == [["2026-01-01", "2026-01-01T02:00:00+00:00"],
                      ["2026-01-02", "2026-01-02T02:00:00+00:00"]]
    code, _, err = cli("--db", db, "run", f"{path}:pipe", "-p", "scheduled_for=2026-02-03")
    assert code == 0, err
