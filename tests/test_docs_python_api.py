"""docs/python-api.md: every code block runs, in order, from the repository's root, offline."""

from __future__ import annotations

import asyncio
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = re.findall(
    r"```python\n(.*?)```", (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8"), re.S
)


def test_the_page_has_examples() -> None:
    assert len(BLOCKS) >= 6


def test_every_example_runs(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    monkeypatch.chdir(ROOT)
    namespace: dict[str, Any] = {"__name__": "python_api_doc"}
    for number, block in enumerate(BLOCKS, 1):
        before = set(namespace)
        exec(compile(block, f"docs/python-api.md block {number}", "exec"), namespace)
        for name in sorted(set(namespace) - before):
            if name.startswith("test_") and callable(namespace[name]):
                # a test written for the pytest plugin: give it the fixtures it names
                fixtures = namespace[name].__code__.co_varnames[: namespace[name].__code__.co_argcount]
                ran = namespace[name](**{f: request.getfixturevalue(f) for f in fixtures})
                if inspect.iscoroutine(ran):  # an async test (the run_agent fixture)
                    asyncio.run(ran)
