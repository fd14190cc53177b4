"""The study page and the widget in headless Chromium: quiz, grading, a cited answer, a demo chart, reload."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.app.web.conftest import Served
from tests.serving import free_port

pytestmark = pytest.mark.slow

XSS = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script><b>bold?</b>'
TIMEOUT = 60_000


def _say(page: Any, text: str, kind: str) -> Any:
    """Type a message, press Enter, and wait for the newest tutor reply of that kind."""
    before = page.locator(f".msg.tutor[data-kind={kind}]").count()
    box = page.locator("#gt-input")
    box.fill(text)
    box.press("Enter")
    page.wait_for_function(
        "([kind, n]) => document.querySelector('#gpu-tutor').shadowRoot"
        ".querySelectorAll(`.msg.tutor[data-kind=${kind}]`).length > n",
        arg=[kind, before],
        timeout=TIMEOUT,
    )
    page.wait_for_selector(".typing", state="hidden", timeout=TIMEOUT)
    return page.locator(f".msg.tutor[data-kind={kind}]").last


def test_a_learner_studies_with_the_widget(served: Served, browser: Any, shots: Path) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(served.url + "/")
    page.get_by_role("button", name="Pipeline parallelism").click()
    page.wait_for_selector("#reading .note")
    page.screenshot(path=str(shots / "01-study-page.png"))

    launcher = page.locator(".launcher")
    launcher.click()
    assert launcher.get_attribute("aria-expanded") == "true"
    assert page.locator("[role=log][aria-live=polite]").count() == 1
    page.evaluate(
        "() => { const r = document.querySelector('#gpu-tutor').shadowRoot; const t = r.querySelector('.typing');"
        " window.__typing = false; new MutationObserver(() => { if (!t.hidden) window.__typing = true; })"
        ".observe(t, {attributes: true}); }"
    )

    question = _say(page, "quiz me on pipline parallelism", "question")
    assert "Pipeline parallelism" in question.inner_text()
    assert page.evaluate("window.__typing") is True  # the typing indicator showed while the reply streamed

    while question.locator(".buttons.choices button").count() == 0:  # find a multiple-choice question
        question = _say(page, "skip", "question")
    row = served.question(question.get_attribute("data-question") or "")
    wrong = row.wrong_options[0]  # typed out in full: a known wrong answer, graded exactly whatever the model
    grade = _say(page, wrong, "grade")
    text = grade.inner_text()
    assert "Not quite" in text and "misconception" in text and row.accepted_answers[0] in text
    cite = grade.locator("details.cite").first
    cite.locator("summary").click()
    assert cite.get_attribute("open") is not None and cite.locator("blockquote").inner_text()
    page.screenshot(path=str(shots / "02-graded-answer.png"))

    answer = _say(page, "what is reduce-scatter?", "answer")
    assert answer.locator("details.cite").count() >= 1 and "[1]" in answer.inner_text()
    assert "reduce-scatter" in answer.inner_text().lower()

    _say(page, "run the all-reduce demo", "demo")
    image = page.locator("figure.chart img").last
    image.wait_for(timeout=TIMEOUT)
    assert image.evaluate("img => img.complete && img.naturalWidth > 0")
    assert (image.get_attribute("src") or "").startswith("data:image/svg+xml;base64,")
    assert page.evaluate("typeof window.alert === 'function' && !window.__pwned")
    page.screenshot(path=str(shots / "03-demo-chart.png"))

    _say(page, XSS, "question")  # an "answer"-shaped message while a question waits: graded, then next question
    learner = page.locator(".msg.learner").last
    assert learner.inner_text() == XSS and learner.locator("img, script, b").count() == 0
    assert page.evaluate("window.__pwned === undefined")

    stored = ".msg:not(.run):not([data-kind=intro])"  # demo progress rows and the greeting are live-only
    count = page.locator(stored).count()
    page.reload()
    page.locator(".launcher").click()
    page.wait_for_function(
        "([sel, n]) => document.querySelector('#gpu-tutor').shadowRoot.querySelectorAll(sel).length === n",
        arg=[stored, count],
        timeout=TIMEOUT,
    )
    for kind in ("question", "grade", "answer", "demo"):
        assert page.locator(f".msg.tutor[data-kind={kind}]").count() >= 1, kind
    assert page.locator(".msg.learner").last.inner_text() == XSS
    page.screenshot(path=str(shots / "04-after-reload.png"))

    page.keyboard.press("Escape")
    assert page.locator(".launcher").get_attribute("aria-expanded") == "false"
    assert page.evaluate("document.querySelector('#gpu-tutor').shadowRoot.activeElement.className") == "launcher"
    assert not errors, errors
    context.close()


def test_the_widget_fits_a_phone_and_is_themable(served: Served, browser: Any, shots: Path) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 780}, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.goto(served.url + "/")
    page.add_style_tag(content="#gpu-tutor { --gt-accent: rgb(200, 30, 30); }")
    page.keyboard.press("Tab")
    page.locator(".launcher").focus()
    page.keyboard.press("Enter")  # keyboard opens it
    box = page.locator(".panel").bounding_box()
    assert box is not None and box["width"] == 390 and box["height"] == 780
    assert page.locator(".panel header").evaluate("h => getComputedStyle(h).backgroundColor") == "rgb(200, 30, 30)"
    _say(page, "quiz me", "question")
    page.screenshot(path=str(shots / "05-phone.png"))
    context.close()


def _other_site(html: str) -> tuple[HTTPServer, str]:
    """A second site on another loopback port (another origin) that serves one page."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", free_port()), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def test_another_site_cannot_use_the_api_from_a_browser(served: Served, browser: Any) -> None:
    """A page on an origin that is not configured embeds the widget: CORS refuses its calls to the API."""
    server, url = _other_site(
        f'<html><body><script src="{served.url}/widget.js" data-api="{served.url}"></script></body></html>'
    )
    context = browser.new_context()
    page = context.new_page()
    page.goto(url)
    page.locator(".launcher").click()
    box = page.locator("#gt-input")
    box.fill("quiz me")
    box.press("Enter")
    page.wait_for_selector(".msg.tutor.error", timeout=TIMEOUT)
    assert page.locator(".msg.tutor[data-kind=question]").count() == 0
    context.close()
    server.shutdown()
