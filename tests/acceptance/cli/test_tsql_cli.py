"""``sbroker sql`` as sqlcmd: result sets on stdout (tables or JSON lines), PRINT on stderr,
exit code 1 after a failed batch, -b, -v, files and standard input."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from sbroker.cli.main import main


def run(db: Path, *args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner(mix_stderr=False).invoke(main, ["--db", str(db), "sql", *args],
                                                input=input)
    return result.exit_code, result.stdout, result.stderr


def test_json_result_sets_and_print_on_stderr(tmp_path: Path) -> None:
    code, out, err = run(tmp_path / "b.db", "--json", "-Q",
                         "print 'starting'\nselect 1 as a, N'x' as b\nselect null as c")
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == [
        {"columns": ["a", "b"], "rows": [[1, "x"]]}, {"columns": ["c"], "rows": [[None]]}]
    assert err == "starting\n"


def test_a_failed_batch_gives_exit_code_1_and_the_script_goes_on(tmp_path: Path) -> None:
    script = "select 1 as first\ngo\nraiserror('broken %d', 16, 1, 7)\ngo\nselect 3 as third"
    code, out, err = run(tmp_path / "b.db", "--json", "-Q", script)
    assert code == 1
    assert [json.loads(line)["columns"] for line in out.splitlines()] == [["first"], ["third"]]
    assert "Msg 50000, Level 16, State 1, batch 2, line 3, column 1: broken 7" in err
    code, out, err = run(tmp_path / "b.db", "--json", "-b", "-Q", script)
    assert code == 1
    assert [json.loads(line)["columns"] for line in out.splitlines()] == [["first"]]


def test_files_in_order_then_query_with_scripting_variables(tmp_path: Path) -> None:
    first = tmp_path / "one.sql"
    first.write_text("create table Notes (text nvarchar(50))\ngo\n"
                     "insert into Notes values (N'$(WORD)')\n", "utf-8")
    code, out, err = run(tmp_path / "b.db", "--json", "-v", "WORD=hello", str(first),
                         "-Q", "select text from Notes")
    assert (code, err) == (0, "")
    assert json.loads(out) == {"columns": ["text"], "rows": [["hello"]]}
    code, out, err = run(tmp_path / "b.db", "-Q", "select '$(MISSING)' as m")
    assert code == 1 and "'MISSING' scripting variable not defined." in err
    code, out, err = run(tmp_path / "b.db", "-v", "oops", "-Q", "select 1")
    assert code == 1 and "use -v NAME=VALUE" in err


def test_standard_input_and_a_table(tmp_path: Path) -> None:
    code, out, err = run(tmp_path / "b.db", input="select 42 as answer\n")
    assert code == 0
    assert "answer" in out and "42" in out and "(1 row affected)" in out


def test_a_syntax_error_names_batch_line_and_column(tmp_path: Path) -> None:
    code, out, err = run(tmp_path / "b.db", "-Q", "select 1\ngo\nselect 2\nif (1 = 1 print 'x'")
    assert code == 1
    assert "Msg 102, Level 15, State 1, batch 2, line 4, column 11" in err
