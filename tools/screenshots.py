"""``python -m tools.screenshots [FOLDER]``: fill a demo database, serve its
dashboard and take a screenshot of every page in headless Chromium (Debian's ``chromium``,
driven by Playwright) into FOLDER (default ``docs/screenshots``)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

PAGES = (("overview", "/"), ("queue", "/queues/Orders"), ("conversations", "/conversations"),
         ("transmission", "/transmission"), ("scheduler", "/scheduler"), ("poison", "/poison"))
CHROMIUM = "/usr/bin/chromium"


def take(folder: Path, *, chromium: str = CHROMIUM) -> list[Path]:
    """Every page's screenshot, written to ``folder``; the paths."""
    from playwright.sync_api import sync_playwright

    from sbroker.apps.dashboard.demo import fill
    from sbroker.apps.dashboard.server import DashboardServer
    from sbroker.broker import Broker

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        broker = Broker.open(Path(tmp) / "demo.db", monitor_interval=0.2)
        try:
            fill(broker, seconds=0.3)
            with DashboardServer(broker, port=0) as server, sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium, headless=True)
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                for name, path in PAGES:
                    page.goto(server.url + path)
                    page.wait_for_selector("#live")
                    target = folder / f"{name}.png"
                    page.screenshot(path=str(target), full_page=True)
                    written.append(target)
                browser.close()
        finally:
            broker.close()
    return written


if __name__ == "__main__":
    for shot in take(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots")):
        print(shot)
