"""ACP over stdio: the protocol on the process's own stdout, and nothing else there.

The file descriptor 1 the editor reads is kept for the protocol alone (a duplicate of it carries
the JSON-RPC stream); descriptor 1 itself then points at stderr, so a stray ``print``, a library's
warning or a child process's output can never corrupt the stream. When the editor closes stdin, the
running turns are interrupted and end as every interrupted turn does (every call answered, the
transcript written), then the process exits cleanly; so does a SIGTERM.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import cast

from acp import Agent
from acp.agent.connection import AgentSideConnection

from runner.acp.agent import RunnerAgent

__all__ = ["serve_stdio"]

#: The longest line the editor may send (an embedded resource can be large).
_LINE_LIMIT = 50 * 1024 * 1024


def protocol_stdout() -> int:
    """A private descriptor for the protocol; descriptor 1 (and ``sys.stdout``) go to stderr from now."""
    sys.stdout.flush()
    protocol = os.dup(1)
    os.dup2(2, 1)
    return protocol


async def serve_stdio(agent: RunnerAgent, *, protocol_fd: int) -> None:
    """Serve ``agent`` on stdin and ``protocol_fd`` until the editor closes stdin."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(protocol_fd, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    # The SDK's Agent protocol lists every optional method; the router answers the missing ones.
    conn = AgentSideConnection(cast(Agent, agent), writer, reader, listening=False)
    terminated = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, terminated.set)  # an editor that quits may send it
    listening = asyncio.create_task(conn.listen(), name="acp-listen")
    ending = asyncio.create_task(terminated.wait(), name="acp-sigterm")
    try:
        await asyncio.wait({listening, ending}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        ending.cancel()
        await agent.shutdown()
        await conn.close()
        listening.cancel()
        await asyncio.gather(listening, ending, return_exceptions=True)
