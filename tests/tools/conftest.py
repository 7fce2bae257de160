"""Fixtures for the tool layer: a run context, a tool factory and throw-away importable modules."""

from __future__ import annotations

import itertools
import logging
import sys
import textwrap
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from runner.tools.base import RunContext, Tool

_counter = itertools.count()


class MakeTool(Protocol):
    def __call__(
        self,
        name: str,
        call: Callable[[dict[str, Any], RunContext], Awaitable[Any]] | None = None,
        *,
        parameters: dict[str, Any] | None = None,
        source_id: str = "test",
        timeout_s: float | None = None,
    ) -> Tool: ...


class WriteModule(Protocol):
    def __call__(self, source: str, *, name: str | None = None) -> str: ...


@pytest.fixture
def ctx(tmp_path: Path) -> RunContext:
    """A run context whose workspace is a fresh temporary directory."""
    return RunContext(
        session_id="sess-1",
        agent="tester",
        vars={"city": "Oslo"},
        workspace=tmp_path,
        logger=logging.getLogger("tests.tools"),
    )


async def _echo(arguments: dict[str, Any], ctx: RunContext) -> Any:
    return arguments


@pytest.fixture
def make_tool() -> MakeTool:
    """Build a ``Tool`` around an async callable (default: echo the arguments back)."""

    def factory(
        name: str,
        call: Callable[[dict[str, Any], RunContext], Awaitable[Any]] | None = None,
        *,
        parameters: dict[str, Any] | None = None,
        source_id: str = "test",
        timeout_s: float | None = None,
    ) -> Tool:
        return Tool(
            name=name,
            description=f"The {name} tool.",
            parameters=parameters if parameters is not None else {"type": "object", "properties": {}},
            source_kind="python",
            source_id=source_id,
            call=call or _echo,
            timeout_s=timeout_s,
        )

    return factory


@pytest.fixture
def module_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory for generated tool modules; their entries in sys.modules are removed afterwards."""
    directory = tmp_path / "agent"
    directory.mkdir()
    before = set(sys.modules)
    yield directory
    for name in set(sys.modules) - before:
        module = sys.modules.get(name)
        if module is not None and str(getattr(module, "__file__", "") or "").startswith(str(directory)):
            del sys.modules[name]


@pytest.fixture
def write_module(module_dir: Path) -> WriteModule:
    """Write Python source as a uniquely named module in ``module_dir``; returns the module name."""

    def factory(source: str, *, name: str | None = None) -> str:
        module_name = name or f"tooltest_mod_{next(_counter)}"
        (module_dir / f"{module_name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        return module_name

    return factory
