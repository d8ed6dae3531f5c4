"""Pipeline files with ``[[task]]`` entries, ``after``, retries, timeouts and ``[schedule]``
(docs/pipelines.md): what they parse to, and every bad input as one line naming the file and
line."""

from __future__ import annotations

import pytest

from sbroker.apps.pipeline import PipelineError, parse_pipeline
from sbroker.apps.pipeline.model import Retry
from sbroker.apps.pipeline.rules import cycle_of, parse_duration

HEAD = '[pipeline]\nname = "p"\n'


def task(name: str, *lines: str) -> str:
    return "\n".join(['[[task]]', f'name = "{name}"', 'sql = "SELECT 1"', *lines]) + "\n"


def test_tasks_with_after_retries_and_timeouts() -> None:
    text = (HEAD + '[options]\nretries = 2\nretry_delay = "250ms"\ntimeout = "2h"\n'
            + task("a") + task("b", 'after = ["a"]', 'retries = 0', 'timeout = 30')
            + task("c", 'after = ["a", "b"]', 'retry_backoff = 3', 'retry_max_delay = "5m"'))
    p = parse_pipeline(text, path="p.toml")
    a, b, c = p.dag
    assert [t.name for t in p.dag] == ["a", "b", "c"]
    assert (a.after, b.after, c.after) == ((), ("a",), ("a", "b"))
    assert a.retry == Retry(2, 0.25, 2.0, 600.0) and a.timeout == 7200.0
    assert b.retry.retries == 0 and b.timeout == 30.0
    assert c.retry == Retry(2, 0.25, 3.0, 300.0)
    assert [c.retry.delay_before(n) for n in (1, 2, 3, 9)] == [0.25, 0.75, 2.25, 300.0]
    assert p.schedule is None


def test_a_stage_file_is_a_dag_each_stage_after_the_one_before() -> None:
    text = (HEAD + '[[stage]]\nname = "s1"\n[[stage.task]]\nname = "x"\nsql = "1"\n'
            '[[stage.task]]\nname = "y"\nsql = "2"\nretries = 1\n'
            '[[stage]]\nname = "s2"\n[[stage.task]]\nname = "x"\nsql = "3"\n')
    p = parse_pipeline(text)
    assert [(t.name, t.after) for t in p.dag] == [
        ("s1/x", ()), ("s1/y", ()), ("s2/x", ("s1/x", "s1/y"))]
    assert p.dag[1].retry.retries == 1


@pytest.mark.parametrize(("text", "seconds"), [
    ("250ms", 0.25), ("10s", 10.0), ("5m", 300.0), ("2h", 7200.0), ("1.5s", 1.5), (3, 3.0),
    (0.5, 0.5)])
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["10 parsecs", "5", "m", "-1s", True, -2, "1d", ""])
def test_not_durations(text: object) -> None:
    assert parse_duration(text) is None


def test_a_schedule() -> None:
    p = parse_pipeline(HEAD + '[schedule]\ncron = "0 2 * * *"\ntimezone = "Europe/Paris"\n'
                       'catchup = true\noverlap = "queue"\n' + task("a"))
    assert p.schedule is not None
    assert (p.schedule.cron, p.schedule.every, p.schedule.timezone, p.schedule.catchup,
            p.schedule.overlap) == ("0 2 * * *", None, "Europe/Paris", True, "queue")
    every = parse_pipeline(HEAD + '[schedule]\nevery = "15m"\n' + task("a")).schedule
    assert every is not None and every.every == 900.0 and every.overlap == "skip"


BAD = [
    (task("a") + task("b", 'after = ["zz"]'), 7, "task 'b' comes after 'zz', which is not"),
    (task("a", 'after = ["c"]') + task("b", 'after = ["a"]') + task("c", 'after = ["b"]'),
     4, "make a cycle: a -> c -> b -> a"),
    (task("a") + task("a"), 5, "duplicate task name 'a'"),
    (task("a", 'after = ["a"]'), 4, "task 'a': a task cannot come after itself"),
    (task("a", 'retry_delay = "10 parsecs"'), 4,
     "task 'a': 'retry_delay' must be a duration such as"),
    (task("a", 'timeout = "0s"'), 4, "'timeout' must be a duration"),
    (task("a", "retries = -1"), 4, "'retries' must be an integer >= 0, got -1"),
    (task("a", "retry_backoff = 0.5"), 4, "'retry_backoff' must be a number >= 1"),
    (task("a", 'after = "b"'), 4, "'after' must be a list of task names"),
    ('[options]\nretries = -1\n' + task("a"), 2, "'retries' must be an integer >= 0"),
    ('[schedule]\ncron = "61 * * * *"\n' + task("a"), 2, "'cron' must be a cron expression"),
    ('[schedule]\ncron = "0 2 * *"\n' + task("a"), 2, "'cron' must be a cron expression"),
    ('[schedule]\nevery = "10 parsecs"\n' + task("a"), 2, "'every' must be a duration"),
    ('[schedule]\nevery = "1h"\ncron = "0 * * * *"\n' + task("a"), 3, "exactly one of"),
    ('[schedule]\nevery = "1h"\ntimezone = "Mars/Olympus"\n' + task("a"), 3,
     "unknown timezone 'Mars/Olympus'"),
    ('[schedule]\nevery = "1h"\noverlap = "maybe"\n' + task("a"), 3, "'overlap' must be"),
    (task("a") + '[[stage]]\nname = "s"\n[[stage.task]]\nsql = "x"\n', 4, "not both"),
    ('[[task]]\nsql = "x"\n', 1, "task 1 needs a 'name'"),
    ('[[stage]]\nname = "s"\n[[stage.task]]\nsql = "x"\nafter = ["y"]\n', 5,
     "unknown key 'after' in [stage.task]"),
]


@pytest.mark.parametrize(("text", "line", "message"), BAD)
def test_bad_input_is_one_line_with_the_file_and_line(text: str, line: int,
                                                      message: str) -> None:
    with pytest.raises(PipelineError) as caught:
        parse_pipeline(text, path="bad.toml")
    error = str(caught.value)
    assert "\n" not in error
    assert error.startswith(f"bad.toml:{line}: "), error
    assert message in error, error


def test_cycle_of_names_the_cycle_or_none() -> None:
    specs = parse_pipeline(task("a") + task("b", 'after = ["a"]')).dag
    assert cycle_of(specs) is None
