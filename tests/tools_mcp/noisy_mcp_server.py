"""A real MCP stdio server (the official SDK's ``MCPServer``) behind a relay that adds junk to its stdout.

    python noisy_mcp_server.py           relay: start the server below, pass its messages on, and
                                         write junk lines before, between and after them
    python noisy_mcp_server.py --serve   the server itself: one tool, ``echo``

The SDK's server keeps its own stdout clean (tool code that prints goes to stderr), so junk between
messages needs the relay. Every junk line written is appended to ``$NOISY_MCP_LOG``, so a test knows
how many there were.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

JUNK = [
    b"junk from the server: not JSON-RPC {\n",
    b"{\n",
    b'{"json": "but not JSON-RPC"}\n',
    b"\xff\xfe broken bytes \xed\xb3\xbf\n",
    b"a very long junk line: [" + b"x" * 100_000 + b"\n",
]


def serve() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("noisy")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    server.run("stdio")


def relay() -> None:
    log_path = os.environ.get("NOISY_MCP_LOG", os.devnull)
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdin is not None and child.stdout is not None
    out = sys.stdout.buffer
    count = 0

    def junk() -> None:
        nonlocal count
        out.write(JUNK[count % len(JUNK)])
        out.flush()
        count += 1
        with open(log_path, "a", encoding="utf-8") as log:
            log.write("junk\n")

    def forward_stdin() -> None:
        assert child.stdin is not None
        for line in sys.stdin.buffer:
            child.stdin.write(line)
            child.stdin.flush()
        child.stdin.close()

    threading.Thread(target=forward_stdin, daemon=True).start()
    junk()
    for line in child.stdout:
        out.write(line)
        out.flush()
        junk()
    child.wait()


if __name__ == "__main__":
    serve() if "--serve" in sys.argv else relay()
