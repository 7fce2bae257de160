"""The sources a runtime holds: a reload shares unchanged ones, reopens the rest; failure changes nothing."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from runner.agentfile.config import AgentConfig, McpServerConfig, ToolSourceConfig
from runner.errors import ConfigError, ConfigErrors
from runner.runtime.sources import SourceSet
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
    monkeypatch.setattr("runner.runtime.sources.loader_for", lambda kind: counting)
    return counting


CTX = SourceContext(agent=AgentConfig(name="a", path=Path("a.yaml")))


async def test_unchanged_sources_are_shared_and_changed_ones_reopened(loader: CountingLoader) -> None:
    first = await SourceSet.open((source("one"), source("two", 1)), CTX)
    assert loader.opened == ["one", "two"]
    # "one" moves to another line (not a config change); "two" gets a new timeout (a change)
    second = await SourceSet.open(
        (source("one", 3, line=9), source("two", 1, timeout_s=5.0)), CTX, previous=first
    )
    assert [config.target for config, _ in second.loaded()] == ["one", "two"]
    assert loader.opened == ["one", "two", "two"]
    assert loader.closed == []  # the first runtime still holds its sources (requests in flight)
    await first.aclose()
    assert loader.closed == ["two"]  # only what the second one did not take over
    await second.aclose()
    assert sorted(loader.closed) == ["one", "two", "two"]


async def test_a_failed_reload_keeps_every_open_source(loader: CountingLoader) -> None:
    first = await SourceSet.open((source("one"),), CTX)
    with pytest.raises(ConfigErrors) as caught:
        await SourceSet.open((source("one"), source("new", 1), source("broken", 2)), CTX, previous=first)
    assert "tools[2]: tool source mcp:broken failed: cannot start" in str(caught.value)
    assert caught.value.errors[0].path == "tools[2]"
    assert loader.closed == ["new"]  # the half-opened new source is closed; "one" stays open
    third = await SourceSet.open((source("one"),), CTX, previous=first)
    assert loader.opened == ["one", "new"]  # "one" was shared, never reopened
    await first.aclose()
    await third.aclose()
    assert sorted(loader.closed) == ["new", "one"]


async def test_open_each_reports_failures_beside_the_sources_that_opened(loader: CountingLoader) -> None:
    sources, failures = await SourceSet.open_each((source("one"), source("broken", 1)), CTX)
    assert [config.target for config, _ in sources.loaded()] == ["one"]
    assert [f.spec.target for f in failures] == ["broken"]
    await sources.aclose()
    assert loader.closed == ["one"]
