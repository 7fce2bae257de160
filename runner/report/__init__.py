"""Pages a person reads in a browser: a session's timeline, an eval's pass rates, a batch's items.

Each page is one self-contained HTML file (``page.render_page``): inline style and script, its data
as JSON inside it, no request of any kind, so it opens from disk and can be mailed. Every string
from a transcript, an eval or a batch line is escaped; secrets are redacted (docs/reports.md).
"""

from __future__ import annotations

from runner.report.pages import batch_data, batch_page, eval_data, eval_page, session_page, write_page

__all__ = ["batch_data", "batch_page", "eval_data", "eval_page", "session_page", "write_page"]
