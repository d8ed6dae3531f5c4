"""The dashboard in a real headless Chromium (Debian's ``chromium``, driven by Playwright).

No browser is downloaded: the tests use /usr/bin/chromium, which ``make test`` installs when
it is missing.  If Chromium cannot start these tests fail; they never skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from support.browser import boxes
from support.otel import traced

import sbroker
from sbroker.apps.dashboard import DashboardServer
from sbroker.apps.dashboard.demo import fill, talk
from sbroker.core.traceparent import trace_id
from tools.screenshots import CHROMIUM, PAGES

pytestmark = pytest.mark.browser
WAIT_MS = 15_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs it (apt-get install chromium)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[sbroker.Broker]:
    broker = sbroker.Broker.open(tmp_path / "demo.db", monitor_interval=0.2)
    fill(broker)
    yield broker
    broker.close()


@pytest.fixture
def server(demo: sbroker.Broker) -> Iterator[DashboardServer]:
    with DashboardServer(demo, port=0, refresh=0.5) as server:
        yield server


@pytest.fixture
def errors() -> list[str]:
    """What the page wrote to the console as errors, and its uncaught exceptions."""
    return []


@pytest.fixture
def page(browser: Browser, errors: list[str]) -> Iterator[Page]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()


def after_one_update(page: Page) -> None:
    """Wait until htmx has swapped the live part in at least once."""
    page.evaluate("""() => new Promise(done =>
        document.body.addEventListener('htmx:afterSettle', () => done(), {once: true}))""")


@pytest.mark.parametrize(("name", "path"), PAGES)
def test_each_page_renders_without_console_errors(server: DashboardServer, page: Page,
                                                  errors: list[str], name: str,
                                                  path: str) -> None:
    response = page.goto(server.url + path)
    assert response is not None and response.status == 200
    expect(page.locator("#live")).to_be_visible()
    after_one_update(page)
    assert page.evaluate("typeof htmx") == "object"
    assert errors == []


def test_a_queues_depth_changes_on_screen_without_a_reload(
        demo: sbroker.Broker, server: DashboardServer, page: Page, errors: list[str]) -> None:
    page.goto(server.url + "/")
    ready = page.locator("#queue-Orders td.ready")
    expect(ready).to_have_text("36")
    page.evaluate("window.sameDocument = true")
    talk(demo, conversations=1, messages=2)  # a worker sends two more
    expect(ready).to_have_text("38")
    assert page.evaluate("window.sameDocument") is True  # swapped in place, not reloaded
    assert errors == []


def test_re_enabling_a_poisoned_queue_from_the_page(demo: sbroker.Broker,
                                                    server: DashboardServer,
                                                    page: Page, errors: list[str]) -> None:
    page.goto(server.url + "/poison")
    row = page.locator("#disabled-Payments")
    expect(row.locator("td.status")).to_have_text("disabled by poison")
    row.get_by_role("button", name="Re-enable").click()
    expect(page.locator(".notice")).to_have_text(
        "queue Payments enabled (was disabled by poison)")
    expect(page.locator("#disabled-Payments")).to_have_count(0)
    [stats] = [q for q in demo.view("queue_stats") if q["queue_name"] == "Payments"]
    assert stats["is_enabled"] == 1
    page.goto(server.url + "/")
    expect(page.locator("#queue-Payments td.status")).to_have_text("enabled")
    assert errors == []


def test_re_driving_selected_parked_messages_from_the_page(
        demo: sbroker.Broker, server: DashboardServer, page: Page) -> None:
    page.goto(server.url + "/poison")
    boxes = page.locator("#records input[name=record]")
    expect(boxes).to_have_count(3)
    boxes.nth(0).check()
    page.get_by_role("button", name="Re-drive selected").click()
    expect(page.locator(".notice")).to_have_text("re-drove 1 message(s)")
    expect(page.locator("#records input[name=record]")).to_have_count(2)
    assert len(demo.peek("Invoices")) == 1


def test_the_gantt_chart_of_a_finished_pipeline_shows_its_stages(
        server: DashboardServer, page: Page, errors: list[str]) -> None:
    page.goto(server.url + "/scheduler")
    chart = page.locator("figure.gantt").last  # the first run: it succeeded
    expect(chart.locator("figcaption")).to_contain_text("succeeded")
    stages = chart.locator("g.bar.stage")
    expect(stages.locator("text")).to_have_text(["extract", "aggregate", "report"])
    bars = boxes(page, "figure.gantt:last-of-type g.bar.stage rect")
    assert len(bars) == 3 and all(b["width"] > 0 for b in bars)
    left = [b["x"] for b in bars]
    assert left == sorted(left)  # each stage starts after the one before
    expect(chart.locator("g.bar.task")).to_have_count(6)
    failed = page.locator("figure.gantt").first
    expect(failed.locator(".task-error")).to_contain_text("missing_table")
    assert errors == []


def test_a_traced_message_links_its_trace_id_to_the_trace_viewer(
        demo: sbroker.Broker, tmp_path: Path, page: Page, errors: list[str]) -> None:
    with traced() as t, sbroker.Broker.open(tmp_path / "demo.db",
                                            instrumentation=t.instrumentation) as traced_demo:
        talk(traced_demo, conversations=1, messages=1, queue="Traced")  # a traced process
    (msg,) = demo.peek("Traced")
    tid = trace_id(msg.trace_context)
    assert tid is not None
    with DashboardServer(demo, port=0, trace_url="http://viewer.test/t/{trace_id}") as server:
        page.goto(server.url + "/queues/Traced")
        expect(page.locator("#messages a.trace")).to_have_attribute(
            "href", f"http://viewer.test/t/{tid}")
        expect(page.locator("#messages a.trace")).to_have_text(tid)
    assert errors == []
