"""The pages opened as a person opens them: headless Chromium (the Debian package) driven by Playwright.

One browser per test module (``browser``); each test gets a fresh page (``open_page``) on which every
request is routed: the page's own file loads, anything else is refused and recorded, and the test
fails if there was one. Console errors and uncaught exceptions are collected the same way.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from runner.cli import main

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Opened:
    """A page opened from disk, and what it did: console errors, requests beyond its own file."""

    page: Any
    url: str
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def check_clean(self) -> None:
        assert self.errors == [], self.errors
        assert self.requests == [], self.requests
        assert self.dialogs == [], self.dialogs

    def text(self, selector: str) -> str:
        return str(self.page.locator(selector).first.text_content())


@pytest.fixture
def open_page(browser: Any) -> Iterator[Callable[[Path], Opened]]:
    contexts: list[Any] = []

    def opener(path: Path) -> Opened:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        opened = Opened(page, path.resolve().as_uri())

        def route(route: Any) -> None:
            if route.request.url == opened.url:
                route.continue_()
            else:
                opened.requests.append(route.request.url)
                route.abort()

        page.route("**/*", route)
        page.on("console", lambda m: opened.errors.append(m.text) if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda exc: opened.errors.append(f"uncaught: {exc}"))
        page.on("dialog", lambda d: (opened.dialogs.append(d.message), d.dismiss()))
        page.goto(opened.url, wait_until="load", timeout=15_000)
        return opened

    yield opener
    for context in contexts:
        context.close()


_PIXEL_STATS = """async (src) => {
  const image = new Image();
  image.src = "data:image/png;base64," + src;
  await image.decode();
  const canvas = document.createElement("canvas");
  canvas.width = image.width;
  canvas.height = image.height;
  const drawing = canvas.getContext("2d");
  drawing.drawImage(image, 0, 0);
  const data = drawing.getImageData(0, 0, canvas.width, canvas.height).data;
  const colours = new Set();
  let inked = 0, sampled = 0;
  for (let y = 0; y < canvas.height; y += 4) {
    for (let x = 0; x < canvas.width; x += 4) {
      const i = (y * canvas.width + x) * 4;
      colours.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
      inked += data[i] !== 255 || data[i + 1] !== 255 || data[i + 2] !== 255;
      sampled += 1;
    }
  }
  return [colours.size, inked, sampled];
}"""


def assert_not_blank(opened: Opened) -> None:
    """A screenshot of the page has drawn content: many colours, and a share of pixels not white.

    The PNG is decoded by Chromium itself, in a page of its own (every 4th pixel of every 4th row is
    sampled): decoding it in Python cost seconds per screenshot.
    """
    shot = base64.b64encode(opened.page.screenshot(type="png")).decode("ascii")
    probe = opened.page.context.new_page()
    try:
        colours, inked, sampled = probe.evaluate(_PIXEL_STATS, shot)
    finally:
        probe.close()
    assert colours > 8, f"the screenshot has {colours} colours"
    assert inked / sampled > 0.02, f"only {inked} of {sampled} sampled pixels are not white"


def page_data(path: Path) -> dict[str, Any]:
    """The JSON a page embeds (as the page's script reads it)."""
    text = path.read_text(encoding="utf-8")
    start = text.index('<script type="application/json" id="report-data">') + len(
        '<script type="application/json" id="report-data">'
    )
    return json.loads(text[start : text.index("</script>", start)])


@pytest.fixture
def invoke(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """``invoke("sessions", "show", ...)``: the ``runner`` app in process; never a traceback.

    On a thread of its own: the sync Playwright of ``browser`` keeps an event loop running on this
    one, and the commands run theirs (``asyncio.run``).
    """
    monkeypatch.setitem(main._state, "debug", False)

    def run(*args: str, env: dict[str, str] | None = None) -> Result:
        with ThreadPoolExecutor(1) as pool:
            result = pool.submit(CliRunner().invoke, main.app, list(args), env=env).result(timeout=60)
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert "Traceback" not in result.output
        return result

    return run
