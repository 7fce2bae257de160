"""``notifications/tools/list_changed`` under ``--watch``: an agent added, removed or described anew
reaches connected clients (the official ``mcp`` client), over HTTP in both protocol generations and
over stdio; without ``--watch`` the capability is not declared."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.mcp_server.conftest import Agents, echo, http_client, wait_for
from tests.serve.watch_common import wait_until_watching

#: How long a test waits for one notification (bounded; nothing is timed).
WAIT_S = 20.0


class Announcements:
    """The ``tools/list_changed`` a 2025-generation client heard (its ``message_handler``)."""

    def __init__(self) -> None:
        self.count = 0
        self._send, self._receive = anyio.create_memory_object_stream[None](100)

    async def handler(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1
            await self._send.send(None)

    async def next(self) -> None:
        with anyio.fail_after(WAIT_S):
            await self._receive.receive()


async def _names(client: Client) -> dict[str, str | None]:
    return {tool.name: tool.description for tool in (await client.list_tools()).tools}


async def _edits_reach_the_client(
    client: Client, watched: Watched, heard: Callable[[], Any], count: Callable[[], int]
) -> None:
    """Add an agent, describe one anew, remove one: each is heard and the next list shows it;
    an edit that leaves the tools as they were (a prompt) is not announced."""
    agents, server, lines = watched.agents, watched.server, watched.lines
    assert await _names(client) == {"helper": "Helps."}
    second = agents.write("second", server, "description: Second opinions.")
    await heard()
    assert await _names(client) == {"helper": "Helps.", "second": "Second opinions."}
    helper = agents.root / "helper.yaml"
    helper.write_text(helper.read_text().replace("description: Helps.", "description: Helps now."))
    await heard()
    assert (await _names(client))["helper"] == "Helps now."
    lines.clear()
    helper.write_text(helper.read_text() + "prompts:\n  system: Only the prompt changed.\n")
    await anyio.to_thread.run_sync(lambda: wait_for(lambda: "~helper" in str(lines), what="the reload"))
    second.unlink()
    await heard()
    assert await _names(client) == {"helper": "Helps now."}
    assert count() == 3  # the prompt's edit, reloaded before the removal, said nothing


@dataclass
class Watched:
    """A ``runner serve --watch`` app on one agent, ``helper``, and the lines it reports."""

    agents: Agents
    server: Any
    served: Any
    lines: list[str]


def _watched(agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any]) -> Watched:
    server = scripted_server(echo, repeat=True)
    agents.write("helper", server, "description: Helps.")
    lines: list[str] = []
    served = serve([agents.root], watch=True, report=lines.append)
    wait_until_watching(agents.root, lines)
    return Watched(agents, server, served, lines)


async def test_a_2025_client_over_http_hears_each_change(
    agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any]
) -> None:
    watched = _watched(agents, scripted_server, serve)
    heard = Announcements()
    async with http_client(watched.served.mcp_url, mode="legacy", message_handler=heard.handler) as client:
        caps = client.server_capabilities.tools
        assert caps is not None and caps.list_changed is True
        await _edits_reach_the_client(client, watched, heard.next, lambda: heard.count)


async def test_a_2026_client_over_http_hears_each_change_on_its_listen_stream(
    agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any]
) -> None:
    watched = _watched(agents, scripted_server, serve)
    async with http_client(watched.served.mcp_url, mode="auto") as client:  # auto: server/discover tells
        assert client.protocol_version == "2026-07-28"
        caps = client.server_capabilities.tools
        assert caps is not None and caps.list_changed is True
        async with _listening(client) as (heard, count):
            await _edits_reach_the_client(client, watched, heard, count)


@asynccontextmanager
async def _listening(client: Client) -> AsyncIterator[tuple[Callable[[], Any], Callable[[], int]]]:
    """A ``subscriptions/listen`` stream for ``toolsListChanged``, as ``(next event, events so far)``."""
    seen = [0]
    async with client.listen(tools_list_changed=True) as subscription:
        assert subscription.honored.tools_list_changed is True
        events = subscription.__aiter__()

        async def heard() -> None:
            with anyio.fail_after(WAIT_S):
                event = await events.__anext__()
            assert type(event).__name__ == "ToolsListChanged"
            seen[0] += 1

        yield heard, lambda: seen[0]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_without_watch_no_change_is_declared(
    mode: str, agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any]
) -> None:
    agents.write("helper", scripted_server(echo, repeat=True), "description: Helps.")
    served = serve([agents.root])
    async with http_client(served.mcp_url, mode=mode) as client:
        caps = client.server_capabilities.tools
        assert caps is not None and not caps.list_changed
        if mode != "legacy":
            with pytest.raises(MCPError) as refused:
                async with client.listen(tools_list_changed=True):
                    pass
            assert refused.value.error.code == types.METHOD_NOT_FOUND, refused.value.error


async def test_runner_mcp_watch_tells_its_stdio_client(
    agents: Agents, scripted_server: Callable[..., Any], stdio: Callable[..., Any]
) -> None:
    server = scripted_server(echo, repeat=True)
    agents.write("helper", server, "description: Helps.")
    heard = Announcements()
    params = stdio([agents.root], "--watch")
    async with Client(params, mode="legacy", message_handler=heard.handler) as client:
        caps = client.server_capabilities.tools
        assert caps is not None and caps.list_changed is True
        assert await _names(client) == {"helper": "Helps."}
        # the watcher may start after the client connected: write again until it is heard
        attempt = 0
        while heard.count == 0:
            attempt += 1
            assert attempt <= 20, "runner mcp --watch never announced the new agent"
            agents.write("newcomer", server, f"description: New {attempt}.")
            with anyio.move_on_after(1.0):
                await heard.next()
        assert (await _names(client))["newcomer"].startswith("New ")
        (agents.root / "newcomer.yaml").unlink()
        while "newcomer" in await _names(client):  # a late notice of the writes may come first
            await heard.next()
        assert await _names(client) == {"helper": "Helps."}


async def test_clients_that_went_away_do_not_stop_the_others_hearing(
    agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any]
) -> None:
    watched = _watched(agents, scripted_server, serve)
    for _ in range(3):  # each lists the tools, so it is remembered, then closes its session
        async with http_client(watched.served.mcp_url, mode="legacy") as gone:
            await _names(gone)
    heard = Announcements()
    async with http_client(watched.served.mcp_url, mode="legacy", message_handler=heard.handler) as client:
        await _names(client)
        agents.write("second", watched.server, "description: Second opinions.")
        await heard.next()
        assert "second" in await _names(client)
        (agents.root / "second.yaml").unlink()  # the closed ones were forgotten: still heard
        await heard.next()
        assert await _names(client) == {"helper": "Helps."}
