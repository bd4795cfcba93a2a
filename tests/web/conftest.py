"""The browser tests' parts: Debian's chromium driven by Playwright through its executable
path (no browser is ever downloaded), and a screenshot of each failing test's page."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("OHM_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = Path(os.environ.get("OHM_SCREENSHOTS", Path(tempfile.gettempdir()) / "ohm-screenshots"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


@pytest.fixture(scope="session")
def browser():
    """A headless chromium. Without one the browser tests skip, unless OHM_REQUIRE_BROWSER=1
    (CI), which makes them fail."""
    problem = None
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        problem = f"no chromium at {CHROMIUM} (apt-get install chromium)"
    else:
        try:
            from playwright.sync_api import sync_playwright
        except ImportError as e:
            problem = f"playwright is not installed: {e}"
    if problem:
        if os.environ.get("OHM_REQUIRE_BROWSER") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    with sync_playwright() as p:
        # --no-sandbox: CI runs as root, where chromium's sandbox refuses to start.
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser, request):
    """A fresh page (JavaScript on); a failing test leaves its screenshot in SCREENSHOTS."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.errors = errors  # type: ignore[attr-defined]
    yield tab
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shot = SCREENSHOTS / f"{request.node.name}.png"
        tab.screenshot(path=str(shot), full_page=True)
        print(f"screenshot of the failing page: {shot}")
    context.close()
