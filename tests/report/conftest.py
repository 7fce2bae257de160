"""The pages opened as a person opens them: headless Chromium (the Debian package) driven by Playwright.

One browser per test module (``browser``); each test gets a fresh page (``open_page``) on which every
request is routed: the page's own file loads, anything else is refused and recorded, and the test
fails if there was one. Console errors and uncaught exceptions are collected the same way.
"""

from __future__ import annotations

import json
import struct
import zlib
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


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """A PNG's width, height and rows of pixels (8-bit RGB or RGBA, as Chromium writes them)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up, corner = previous[x], previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + up) & 255
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, rows


def assert_not_blank(opened: Opened) -> None:
    """A screenshot of the page has drawn content: many colours, and a share of pixels not white."""
    width, _, rows = png_pixels(opened.page.screenshot(type="png"))
    channels = len(rows[0]) // width
    colours: set[bytes] = set()
    inked = 0
    for row in rows[::4]:
        for x in range(0, len(row), channels * 4):
            pixel = row[x : x + 3]
            colours.add(pixel)
            inked += pixel != b"\xff\xff\xff"
    sampled = len(rows[::4]) * len(range(0, width * channels, channels * 4))
    assert len(colours) > 8, f"the screenshot has {len(colours)} colours"
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
