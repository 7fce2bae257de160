"""What the serve --watch tests share: waiting for a condition, and a model that calls ``version``."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def wait_for(condition: Callable[[], bool], *, timeout: float = 15.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def wait_until_watching(folder: Path, lines: list[str], *, timeout: float = 15.0) -> None:
    """Wait until ``runner serve --watch`` sees edits in ``folder``: a probe agent file is written
    (again, until its ``+watch-probe`` line comes), then removed (until its ``-watch-probe`` line);
    ``lines`` is cleared after. An edit made before the watcher started would be missed."""
    probe = folder / "watch-probe.yaml"
    deadline = time.monotonic() + timeout
    attempt = 0
    while not any("+watch-probe" in line for line in lines):
        assert time.monotonic() < deadline, f"the watcher never reported the probe file: {lines}"
        attempt += 1
        text = f"version: 1\nname: watch-probe\nmodel: openai/probe  # {attempt}\n"
        probe.write_text(text, encoding="utf-8")
        wait = time.monotonic() + 0.5
        while time.monotonic() < wait and not any("+watch-probe" in line for line in lines):
            time.sleep(0.02)
    probe.unlink()
    wait_for(lambda: any("-watch-probe" in line for line in lines), timeout=timeout, what="the probe removed")
    lines.clear()


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """Call the ``version`` tool, then say what it returned."""
    if body["messages"][-1]["role"] == "user":
        return {"tool_calls": [{"name": "version", "arguments": {}}]}
    return {"content": f"tool said {body['messages'][-1]['content']}"}
