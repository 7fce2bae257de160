"""One self-contained HTML page: inline style and script, the data as JSON, nothing fetched.

The data is embedded in a ``<script type="application/json">`` block (never run) with every ``<``,
``>`` and ``&`` written as a JSON escape, and U+2028/U+2029 too, so no string in it can close the
block, open a comment or end a line in a script; the page's script reads it with ``JSON.parse`` and
puts every string in the page with ``textContent``. The Content-Security-Policy allows only the
page's own style and script (by hash) and forbids every request: no network, no CDN, no fonts, no
images by URL. Secrets are redacted from the data before it is written (``runner.redact``).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from functools import cache
from importlib import resources
from typing import Any

from runner.redact import Redactor

__all__ = ["embed_json", "render_page"]


@cache
def asset(name: str) -> str:
    """A file of ``runner/report/assets`` (the page's style and scripts)."""
    return resources.files("runner.report").joinpath("assets", name).read_text(encoding="utf-8")


def embed_json(value: Any, redactor: Redactor | None = None) -> str:
    """``value`` as JSON that is safe inside a ``<script>`` block (and still the same JSON), with
    ``redactor``'s secrets masked."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    if redactor is not None and redactor.found_in(text):  # rare: only then walk every string
        text = json.dumps(redactor.record(value), ensure_ascii=False, separators=(",", ":"), default=str)
        text = redactor(text)  # again: values only ``default=str`` could show
    for unsafe, escape in _ESCAPES:
        text = text.replace(unsafe, escape)
    return text


#: What a JSON string may hold that must not appear raw inside a script block, and its JSON escape.
_ESCAPES = (
    ("&", "\\u0026"),
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


def _digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def render_page(title: str, data: dict[str, Any], *, script: str, redactor: Redactor | None = None) -> str:
    """The page: ``data`` (redacted) drawn by ``assets/common.js`` and ``assets/{script}``."""
    payload = embed_json(data, redactor)
    style = asset("page.css")
    code = asset("common.js") + "\n" + asset(script)
    policy = (
        f"default-src 'none'; script-src {_digest(code)}; style-src {_digest(style)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{style}</style>\n</head>\n<body>\n"
        "<noscript>This page draws its report with JavaScript, which is off.</noscript>\n"
        f'<script type="application/json" id="report-data">{payload}</script>\n'
        f"<script>{code}</script>\n</body>\n</html>\n"
    )
