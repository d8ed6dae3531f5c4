"""The dashboard's page of durable pipeline runs in a real headless Chromium: a run's status
and the time it is for, each task's attempts and retries on the timeline, the schedules with
their next due time, and a running run cancelled with its button."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright
from support.browser import boxes

import sbroker
from sbroker.apps.dashboard import DashboardServer
from sbroker.apps.pipeline import load_pipeline, parse_pipeline, start_run
from sbroker.apps.pipeline.schedules import add_schedule
from sbroker.apps.spark import StubRunner
from tools.screenshots import CHROMIUM

pytestmark = pytest.mark.browser
HELPERS = Path(__file__).parents[1] / "integration" / "pipeline"
FLAKY = '''
[pipeline]
name = "nightly"
[[task]]
name = "a"
python = "pipeline_task_helpers:add"
args = {{ a = 1, b = 2 }}
[[task]]
name = "f"
python = "pipeline_task_helpers:flaky"
after = ["a"]
retries = 1
retry_delay = "10ms"
args = {{ path = "{counter}", fails = 1 }}
[[task]]
name = "boom"
python = "pipeline_task_helpers:boom"
after = ["a"]
[[task]]
name = "late"
python = "pipeline_task_helpers:add"
after = ["boom"]
args = {{ a = 1, b = 1 }}
'''


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[sbroker.Broker]:
    sys.path.insert(0, str(HELPERS))
    b = sbroker.Broker.open(tmp_path / "runs.db")
    b.install_executor(max_queue_readers=2, runner=StubRunner())
    b.start()
    try:
        yield b
    finally:
        b.close()
        sys.path.remove(str(HELPERS))


@pytest.fixture
def page() -> Iterator[Page]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs it (apt-get install chromium)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = browser.new_page()
        page.set_default_timeout(15_000)
        yield page
        browser.close()


def test_runs_with_attempts_and_retries_and_schedules_with_next_due(
        broker: sbroker.Broker, page: Page, tmp_path: Path) -> None:
    state = start_run(broker, parse_pipeline(FLAKY.format(counter=tmp_path / "calls")))
    assert state.status == "failed"
    path = tmp_path / "nightly.toml"
    path.write_text('[pipeline]\nname = "nightly"\n[schedule]\ncron = "0 2 * * *"\n'
                    '[[task]]\nname = "a"\nsql = "SELECT 1"\n')
    schedule = add_schedule(broker, load_pipeline(path), overrides={})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    with DashboardServer(broker, port=0, refresh=0.5) as server:
        page.goto(server.url + "/scheduler")
        page.click("#pipeline-runs")
        run = page.locator(f"#pipeline-run-{state.run_id}")
        expect(run.locator(".run-status")).to_have_text("failed")
        expect(run.locator(".scheduled-for")).to_have_text(str(state.scheduled_for))
        flaky = run.locator("g.task-row[data-task=f]")
        expect(flaky).to_have_attribute("data-retries", "1")
        expect(flaky.locator("g.bar.attempt")).to_have_count(2)
        expect(flaky.locator("g.bar.attempt.failed")).to_have_count(1)
        expect(flaky.locator("g.bar.attempt.succeeded")).to_have_count(1)
        expect(flaky.locator("text")).to_contain_text("2 attempts (1 retry)")
        expect(run.locator("g.task-row[data-task=late]")).to_contain_text("skipped")
        expect(run.locator("g.task-row[data-task=late] g.bar")).to_have_count(0)
        bars = boxes(page, f"#pipeline-run-{state.run_id} g.task-row[data-task=f] rect")
        assert len(bars) == 2 and all(b["width"] > 0 for b in bars)
        assert bars[0]["x"] < bars[1]["x"]
        expect(page.locator("#schedules td.next-due")).to_have_text(schedule["next_due"])
        expect(page.locator("#schedules td.max-active-runs")).to_have_text("1")
    assert errors == []


def test_a_running_run_is_cancelled_from_its_page(broker: sbroker.Broker, page: Page,
                                                  tmp_path: Path) -> None:
    from sbroker.apps.pipeline import DurableRunner, RunState

    release = tmp_path / "release"
    pipeline = parse_pipeline(f'[pipeline]\nname = "held"\n[[task]]\nname = "a"\n'
                              f'python = "pipeline_task_helpers:hang"\n'
                              f'args = {{ release = "{release}" }}\n[[task]]\nname = "b"\n'
                              f'sql = "SELECT 1"\nafter = ["a"]\n')
    runner = DurableRunner(broker, pipeline)
    state = runner.create()
    out: list[RunState] = []
    driver = threading.Thread(target=lambda: out.append(runner.drive(state)), daemon=True)
    driver.start()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("dialog", lambda dialog: dialog.accept())  # "Cancel run 1?"
    try:
        with DashboardServer(broker, port=0, refresh=0.5) as server:
            page.goto(server.url + "/scheduler/runs")
            run = page.locator(f"#pipeline-run-{state.run_id}")
            expect(run.locator(".run-status")).to_have_text("running")
            expect(run.locator(".driver")).to_contain_text("driven by")
            run.locator("button", has_text="Cancel run").click()
            expect(page.locator(f"#pipeline-run-{state.run_id} .run-status")).to_have_text(
                "cancelled")
            expect(page.locator(f"#pipeline-run-{state.run_id} button")).to_have_count(0)
            expect(page.locator(f"#pipeline-run-{state.run_id} g.task-row[data-task=b]")
                   ).to_contain_text("pending")
        driver.join(60)
        assert out and out[0].status == "cancelled"
    finally:
        release.touch()
        driver.join(60)
    assert errors == []
