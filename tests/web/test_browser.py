"""The inspector in a real browser: ``openhands-memory serve`` started as a process on a free
port, Debian's chromium driven by Playwright. Open the demo, go to a call, see its summary and
what was forgotten, step with j and k, follow a search hit, switch branch, and do it all again
with JavaScript off."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .demo import build

ROOT = Path(__file__).resolve().parents[2]
README_SHOT = ROOT / "docs" / "images" / "inspector-call.png"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("browser")
    build(str(folder / "openhands-memory-demo.db"))
    proc = subprocess.Popen(  # named as the README's command names it: the page shows the name
        [sys.executable, "-m", "openhands_memory.cli", "serve", "openhands-memory-demo.db", "--port", "0", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=folder,
    )
    try:
        line = proc.stdout.readline()
        if not line:
            pytest.fail(f"serve did not start: {proc.stderr.read()}")
        yield json.loads(line)["url"].rstrip("/")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_open_the_demo_go_to_a_call_and_see_its_summary_and_what_was_forgotten(page, server):
    page.goto(server + "/")
    page.get_by_role("link", name="demo", exact=True).click()
    assert page.locator("h1").inner_text() == "demo"
    page.get_by_label("call number").fill("50")
    page.get_by_label("call number").press("Enter")
    page.wait_for_url(re.compile(r"/c/demo/call/50$"))
    assert "Nothing was forgotten before this call." in page.locator("#forgotten").inner_text()
    page.goto(server + "/c/demo")
    first = page.locator("table.list a[href*='/call/']").first  # the first condensation's call
    n = int(first.inner_text())
    first.click()
    page.wait_for_url(re.compile(rf"/c/demo/call/{n}$"))
    assert page.locator("li.item.summary").count() == 1
    assert "a summary was written" in page.locator("#change").inner_text()
    forgotten = page.locator("#forgotten section.group").first
    assert re.search(r"forgot \d+ events \d+\.\.\d+", forgotten.inner_text())
    forgotten.locator("details").first.locator("summary").click()
    assert forgotten.locator("details pre").first.is_visible()
    assert page.errors == []  # nothing the page's policy refused, no script error


def test_j_and_k_step_through_the_calls(page, server):
    page.goto(server + "/c/demo/call/60")
    page.keyboard.press("j")
    page.wait_for_url(re.compile(r"/c/demo/call/61$"))
    page.keyboard.press("k")
    page.wait_for_url(re.compile(r"/c/demo/call/60$"))
    page.keyboard.press("k")
    page.wait_for_url(re.compile(r"/c/demo/call/59$"))
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.name") == "q"


def test_a_search_hit_leads_to_the_event_and_the_first_call_that_no_longer_saw_it(page, server):
    page.goto(server + "/c/demo")
    box = page.locator("header .search input[type=search]")
    box.fill("pytest")
    box.press("Enter")
    page.wait_for_url(re.compile(r"/search\?"))
    hit = page.locator("li.hit").filter(has_text="unseen from").first
    call_link = hit.get_by_role("link", name=re.compile(r"^call \d+$"))
    n = int(call_link.inner_text().split()[1])
    hit.get_by_role("link", name=re.compile(r"^demo #\d+$")).click()
    page.wait_for_url(re.compile(r"/c/demo/event/\d+$"))
    assert "forgotten by" in page.locator("ul.facts").inner_text()
    page.get_by_role("link", name=f"call {n}", exact=True).click()
    page.wait_for_url(re.compile(rf"/c/demo/call/{n}$"))


def test_switching_branch_in_the_tree_shows_that_branchs_calls(page, server):
    page.goto(server + "/c/demo")
    head_calls = int(re.search(r"([\d,]+) model calls", page.locator("p.facts").inner_text()).group(1))
    other = page.locator("table.tree tr:not(.head) a.branch")
    other.click()
    page.wait_for_url(re.compile(r"/c/demo\?branch=\d+$"))
    assert "branch ending at event" in page.locator("p.branch-note").inner_text()
    calls = int(re.search(r"([\d,]+) model calls", page.locator("p.facts").inner_text()).group(1))
    assert calls < head_calls
    page.get_by_role("link", name="last call").click()
    page.wait_for_url(re.compile(rf"/c/demo/call/{calls}\?branch=\d+$"))
    assert "branch ending at" in page.locator("nav.crumbs").inner_text()


def test_every_page_works_with_javascript_off(browser, server):
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(server + "/c/demo")
        page.get_by_label("call number").fill("42")
        page.get_by_role("button", name="go").click()  # the server redirects the form
        page.wait_for_url(re.compile(r"/c/demo/call/42$"))
        page.locator("a[rel=next]").click()
        page.wait_for_url(re.compile(r"/c/demo/call/43$"))
        page.locator("details").first.locator("summary").click()  # <details> needs no script
        assert page.locator("details[open]").count() >= 1
        page.goto(server + "/c/demo/events")
        page.locator("a[rel=next]").click()
        page.wait_for_url(re.compile(r"/c/demo/events\?after=199$"))
    finally:
        context.close()


def test_hostile_text_does_not_run_in_the_browser(page, server):
    page.goto(server + "/search?q=PWNED&scope=all")
    page.locator("li.hit a").first.click()
    page.wait_for_url(re.compile(r"/c/demo/event/\d+$"))
    assert "window.PWNED" in page.locator("pre.whole").first.inner_text()
    assert page.evaluate("typeof window.PWNED") == "undefined"


def test_the_call_page_screenshot(page, server, tmp_path):
    """The README's picture of the call page, made from the demo. It is written into docs/
    when OHM_WRITE_SCREENSHOT=1; otherwise the committed one must exist and stay small."""
    page.set_viewport_size({"width": 1200, "height": 760})
    page.goto(server + "/c/demo/call/60")
    shot = tmp_path / "call.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000  # a page, not a blank
    if os.environ.get("OHM_WRITE_SCREENSHOT") == "1":
        README_SHOT.parent.mkdir(parents=True, exist_ok=True)
        README_SHOT.write_bytes(shot.read_bytes())
    assert README_SHOT.exists() and README_SHOT.stat().st_size < 300_000
