"""64 concurrent streamed conversations through the async openai SDK: all complete, none mixed up."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

ADD_TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """Add the user's number to itself with the tool, then say the tool's result."""
    last = body["messages"][-1]
    if last["role"] == "user":
        n = int(re.findall(r"\d+", last["content"])[0])
        return {"content": f"Adding {n}.", "tool_calls": [{"name": "add", "arguments": {"a": n, "b": n}}]}
    return {"content": f"The sum is {last['content']}."}


async def test_64_concurrent_streams_complete_without_error(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], recorder: Any
) -> None:
    server = scripted(reply)
    agent_files.write("doubler", server, tools=ADD_TOOLS)
    served = serve_app([agent_files.root])
    client = served.async_openai()

    async def conversation(n: int) -> str:
        stream = await client.chat.completions.create(
            model="doubler",
            messages=[{"role": "user", "content": f"double {n}"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
        assert chunks[-1].usage is not None
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    contents = await asyncio.wait_for(asyncio.gather(*(conversation(n) for n in range(64))), timeout=60)
    await client.close()
    for n, content in enumerate(contents):
        assert content.startswith(f"Adding {n}.\n<details"), content
        assert content.endswith(f"</details>\nThe sum is {2 * n}."), content
    assert len(server.requests) == 128
    assert recorder.verify() == 64
