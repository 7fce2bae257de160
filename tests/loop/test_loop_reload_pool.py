"""The source pool behind hot reload: only changed sources are reopened; a failed reload changes nothing."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from runner.agentfile.config import AgentConfig, McpServerConfig, ToolSourceConfig
from runner.errors import ConfigError
from runner.loop.reload import SourcePool
from runner.tools.base import Tool
from runner.tools.sources import LoadedSource, SourceContext


class CountingLoader:
    """Stands in for a source kind: counts opens and closes, fails for targets named 'broken'."""

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.closed: list[str] = []

    async def __call__(
        self, spec: ToolSourceConfig, ctx: SourceContext, stack: AsyncExitStack
    ) -> LoadedSource:
        if spec.target == "broken":
            raise ConfigError("cannot start")
        self.opened.append(spec.target)
        stack.callback(self.closed.append, spec.target)

        async def call(arguments: dict[str, Any], ctx: Any) -> str:
            return spec.target

        return LoadedSource(
            [Tool(spec.target, "d", {"type": "object", "properties": {}}, "mcp", spec.target, call)]
        )


def source(target: str, index: int = 0, **changes: Any) -> ToolSourceConfig:
    base = ToolSourceConfig(
        kind="mcp", target=target, base_dir=Path("."), mcp=McpServerConfig(url="http://x/" + target)
    )
    return replace(base, index=index, **changes)


@pytest.fixture
def loader(monkeypatch: pytest.MonkeyPatch) -> CountingLoader:
    counting = CountingLoader()
    monkeypatch.setattr("runner.loop.reload.loader_for", lambda kind: counting)
    return counting


async def test_unchanged_sources_are_reused_and_changed_ones_reopened(loader: CountingLoader) -> None:
    pool = SourcePool()
    ctx = SourceContext(agent=AgentConfig(name="a", path=Path("a.yaml")))
    await pool.load((source("one"), source("two", 1)), ctx)
    assert loader.opened == ["one", "two"]
    # "one" moves to another line (not a config change); "two" gets a new timeout (a change)
    loaded, failures = await pool.load((source("one", 3, line=9), source("two", 1, timeout_s=5.0)), ctx)
    assert not failures and [s.target for s, _ in loaded] == ["one", "two"]
    assert loader.opened == ["one", "two", "two"]
    assert loader.closed == ["two"]
    await pool.aclose()
    assert sorted(loader.closed) == ["one", "two", "two"]


async def test_a_failed_reload_keeps_every_open_source(loader: CountingLoader) -> None:
    pool = SourcePool()
    ctx = SourceContext(agent=AgentConfig(name="a", path=Path("a.yaml")))
    await pool.load((source("one"),), ctx)
    loaded, failures = await pool.load((source("new"), source("broken", 1)), ctx)
    assert loaded == [] and [f.spec.target for f in failures] == ["broken"]
    assert loader.closed == ["new"]  # the half-opened new source is closed; "one" stays open
    loaded, _ = await pool.load((source("one"),), ctx)
    assert loader.opened == ["one", "new"]  # "one" was reused, never reopened
    await pool.aclose()
