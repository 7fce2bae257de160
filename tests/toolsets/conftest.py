"""Fixtures for the built-in toolsets: a run context and a loader that opens ``builtin:`` sources."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Protocol

import pytest

from runner.agentfile.config import AgentConfig, ToolSourceConfig
from runner.tools.base import RunContext, Tool
from runner.tools.builtin import load_source
from runner.tools.sources import SourceContext


class LoadBuiltin(Protocol):
    async def __call__(
        self,
        name: str,
        options: dict[str, Any] | None = None,
        *,
        confirm: bool | None = None,
        base_dir: Path | None = None,
    ) -> dict[str, Tool]: ...


@pytest.fixture
def run_ctx(tmp_path: Path) -> RunContext:
    """The context a tool call gets, for session ``s1``."""
    return RunContext(session_id="s1", agent="tester", workspace=tmp_path)


def _source_context(tmp_path: Path) -> SourceContext:
    """A source context for an agent file ``agent.yaml`` in ``tmp_path``."""
    return SourceContext(agent=AgentConfig(name="tester", path=tmp_path / "agent.yaml"))


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    """The session's exit stack, closed after the test."""
    async with AsyncExitStack() as session_stack:
        yield session_stack


@pytest.fixture
def load_builtin(tmp_path: Path, stack: AsyncExitStack) -> LoadBuiltin:
    """Open ``builtin: <name>`` with ``with: options`` (agent file in ``tmp_path``); tools by name."""

    async def load(
        name: str,
        options: dict[str, Any] | None = None,
        *,
        confirm: bool | None = None,
        base_dir: Path | None = None,
    ) -> dict[str, Tool]:
        spec = ToolSourceConfig(
            kind="builtin",
            target=name,
            base_dir=base_dir or tmp_path,
            options=options or {},
            confirm=confirm,
        )
        loaded = await load_source(spec, _source_context(tmp_path), stack)
        return {tool.name: tool for tool in loaded.tools}

    return load
