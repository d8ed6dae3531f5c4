"""Helpers for the tests that drive the dashboard in a real Chromium."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page

# The live pages swap their content every ``refresh`` seconds (htmx, outerHTML).  Measuring
# element by element, or through a locator (which finds the elements and then measures them in
# two round trips), can meet a swap in between and measure a detached element: None, or a box
# of zeros.  One script that both finds and measures runs in one page task, with no swap inside.
_MEASURE = """selector => Array.from(document.querySelectorAll(selector), e => {
  const r = e.getBoundingClientRect();
  return {x: r.x, y: r.y, width: r.width, height: r.height};
})"""


def boxes(page: Page, css: str) -> list[dict[str, Any]]:
    """The bounding boxes of the elements the CSS selector ``css`` matches, in document order."""
    return page.evaluate(_MEASURE, css)
