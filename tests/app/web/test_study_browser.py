"""The study page's notes in headless Chromium: a topic's notes render with their contents and questions,
the table of contents scrolls to its section, a hostile note stays inert, and a citation in the chat
widget opens the cited passage. Screenshots go to artifacts/widget/study-*.png."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.app.web.conftest import Served
from tests.app.web.test_widget_browser import TIMEOUT, _say

pytestmark = pytest.mark.slow


def _page(browser: Any, served: Served) -> tuple[Any, Any, list[str]]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(served.url + "/")
    return context, page, errors


def _in_view(page: Any, selector: str) -> bool:
    return bool(page.evaluate(
        "sel => { const r = document.querySelector(sel).getBoundingClientRect();"
        " return r.top >= 0 && r.top < window.innerHeight; }", selector,
    ))


def test_a_topic_shows_its_notes_contents_and_questions(served: Served, browser: Any, shots: Path) -> None:
    context, page, errors = _page(browser, served)
    page.get_by_role("button", name="Pipeline parallelism").click()
    note = page.locator('.note[data-note="pipeline-parallelism.md"]')
    note.wait_for(timeout=TIMEOUT)
    assert note.locator("h3").inner_text() and note.locator(".passage").count() >= 5
    assert note.locator(".passage code").count() >= 1  # Markdown is rendered, not shown raw
    toc = note.locator(".toc a")
    assert toc.count() >= 3
    assert note.locator(".questions li").count() >= 1
    assert note.locator("button.quiz", has_text="Quiz me on this").count() == 1
    assert note.locator(".refs li").count() >= 1
    page.screenshot(path=str(shots / "study-01-topic-notes.png"))

    last = toc.last
    anchor = (last.get_attribute("href") or "").lstrip("#")
    last.click()
    page.wait_for_function("a => location.hash === '#' + a", arg=anchor, timeout=TIMEOUT)
    assert _in_view(page, f"#{anchor}")
    assert page.evaluate("() => document.activeElement.id") == anchor
    page.screenshot(path=str(shots / "study-02-contents-link.png"))

    note.locator("button.quiz").click()  # the button asks the widget for a quiz on the topic
    page.locator(".msg.tutor[data-kind=question]").last.wait_for(timeout=TIMEOUT)
    assert "Pipeline parallelism" in page.locator(".msg.tutor[data-kind=question]").last.inner_text()
    assert not errors, errors
    context.close()


def test_a_hostile_note_renders_inert(served: Served, browser: Any, shots: Path) -> None:
    context, page, errors = _page(browser, served)
    page.get_by_role("button", name="Asynchronous training").click()
    note = page.locator('.note[data-note="hostile.md"]')
    note.wait_for(timeout=TIMEOUT)
    note.scroll_into_view_if_needed()
    note.locator(".passage").first.hover()
    for passage in note.locator(".passage").all():
        passage.hover()
    text = note.inner_text()
    assert "<script>" in text and "raw bold" in text  # shown as text
    assert note.locator("script, iframe, img, div[style], b, [onclick], [onerror], [onmouseover]").count() == 0
    hrefs = [a.get_attribute("href") or "" for a in note.locator("a").all()]
    assert not [h for h in hrefs if re.match(r"\s*(javascript|data|vbscript):", h, re.I)], hrefs
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned === undefined")
    page.screenshot(path=str(shots / "study-03-hostile-note.png"))
    assert not errors, errors
    context.close()


def test_a_citation_in_the_widget_opens_its_passage(served: Served, browser: Any, shots: Path) -> None:
    context, page, errors = _page(browser, served)
    page.locator(".launcher").click()
    answer = _say(page, "what does DistributedSampler set_epoch do?", "answer")
    cite = answer.locator("details.cite").first
    cite.locator("summary").click()
    link = cite.locator("a.open-passage")
    href = link.get_attribute("href") or ""
    passage_id = href.rsplit("=", 1)[-1]
    assert href == f"{served.url}/#passage={passage_id}" and link.get_attribute("target") is None
    link.click()
    cited = page.locator(f"#passage-{passage_id}")
    cited.wait_for(timeout=TIMEOUT)
    page.wait_for_function(
        "id => document.getElementById('passage-' + id).classList.contains('cited')", arg=passage_id, timeout=TIMEOUT
    )
    assert _in_view(page, f"#passage-{passage_id}")
    assert page.locator('.topics button[aria-current="true"]').inner_text().startswith("Data parallelism")
    assert "set_epoch" in cited.inner_text()
    page.screenshot(path=str(shots / "study-04-cited-passage.png"))

    page.goto(served.url + "/#passage=p_000000000000")  # a stale link says so instead of failing silently
    page.get_by_role("alert").wait_for(timeout=TIMEOUT)
    assert not errors, errors
    context.close()
