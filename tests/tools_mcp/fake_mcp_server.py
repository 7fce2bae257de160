"""A scripted MCP server over stdio, standard library only, for what the reference servers cannot show.

Pages of two tools (so listing must follow ``nextCursor``), broken input schemas, a tool that kills
the process mid-call, one that adds a tool and announces ``notifications/tools/list_changed``, mixed
content, ``isError`` and JSON-RPC errors. Every ``initialize`` appends a line to ``$FAKE_MCP_LOG``, and
every ``tools/call`` its ``_meta`` (as JSON) to ``$FAKE_MCP_META_LOG`` (the trace context a client sent).

    python fake_mcp_server.py             serve on stdin/stdout
    python fake_mcp_server.py --exit-now  print a config error on stderr and exit 3 at once
"""

from __future__ import annotations

import base64
import json
import os
import sys
from typing import Any

OBJECT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
TOOLS: list[dict[str, Any]] = [
    {"name": "echo", "description": "Echo the text.", "inputSchema": {"$schema": "x", **OBJECT}},
    {"name": "no_type", "description": "Schema without a type.", "inputSchema": {"properties": {}}},
    {"name": "bad_schema", "description": "A string schema.", "inputSchema": {"type": "string"}},
    {"name": "fail", "description": "Reports an error.", "inputSchema": {"type": "object"}},
    {"name": "rpc_error", "description": "Answers with a JSON-RPC error.", "inputSchema": {"type": "object"}},
    {"name": "crash", "description": "Exits mid-call.", "inputSchema": {"type": "object"}},
    {"name": "add_tool", "description": "Adds the tool 'late'.", "inputSchema": {"type": "object"}},
    {"name": "mixed", "description": "Every kind of content.", "inputSchema": {"type": "object"}},
]
LATE = {"name": "late", "description": "Added at run time.", "inputSchema": {"type": "object"}}
PAGE = 2
AUDIO = base64.b64encode(b"\0" * 3000).decode()


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    if name == "echo":
        return {"content": [{"type": "text", "text": arguments.get("text", "")}]}
    if name == "fail":
        return {"content": [{"type": "text", "text": "it broke"}], "isError": True}
    if name == "crash":
        sys.stderr.write("fake server: crashing on purpose\n")
        sys.stderr.flush()
        os._exit(7)
    if name == "add_tool":
        if LATE not in TOOLS:
            TOOLS.append(LATE)
        send({"method": "notifications/tools/list_changed"})
        return {"content": [{"type": "text", "text": "added"}]}
    if name == "late":
        return {"content": [{"type": "text", "text": "late tool works"}]}
    if name == "mixed":
        blob = base64.b64encode(b"x" * 1500).decode()
        return {
            "content": [
                {"type": "text", "text": "intro"},
                {"type": "audio", "data": AUDIO, "mimeType": "audio/wav"},
                {
                    "type": "resource",
                    "resource": {"uri": "mem://b", "mimeType": "application/zip", "blob": blob},
                },
                {
                    "type": "resource",
                    "resource": {"uri": "mem://t", "mimeType": "text/plain", "text": "inside"},
                },
                {"type": "resource_link", "uri": "file:///x.csv", "name": "x.csv", "size": 2048},
            ],
            "structuredContent": {"rows": 3},
        }
    raise KeyError(name)


def handle(message: dict[str, Any]) -> None:
    method, ident, params = message.get("method"), message.get("id"), message.get("params") or {}
    if ident is None:  # a notification
        return
    if method == "initialize":
        if log := os.environ.get("FAKE_MCP_LOG"):
            with open(log, "a", encoding="utf-8") as file:
                file.write(f"{os.getpid()}\n")
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "fake/scripted", "version": "1.0"},
            "instructions": "Prefer echo for repeating text.",
        }
        send({"id": ident, "result": result})
    elif method == "tools/list":
        start = int(params.get("cursor") or 0)
        page: dict[str, Any] = {"tools": TOOLS[start : start + PAGE]}
        if start + PAGE < len(TOOLS):
            page["nextCursor"] = str(start + PAGE)
        send({"id": ident, "result": page})
    elif method == "tools/call":
        if log := os.environ.get("FAKE_MCP_META_LOG"):
            with open(log, "a", encoding="utf-8") as file:
                file.write(json.dumps(params.get("_meta") or {}) + "\n")
        if params.get("name") == "rpc_error":
            send({"id": ident, "error": {"code": -32602, "message": "bad arguments for rpc_error"}})
            return
        send({"id": ident, "result": call(params["name"], params.get("arguments") or {})})
    elif method == "ping":
        send({"id": ident, "result": {}})
    else:
        send({"id": ident, "error": {"code": -32601, "message": f"method not found: {method}"}})


def main() -> None:
    if "--exit-now" in sys.argv:
        sys.stderr.write("fake server: starting\nfatal: missing setting FAKE_TOKEN\n")
        sys.exit(3)
    for line in sys.stdin:
        if line.strip():
            handle(json.loads(line))


if __name__ == "__main__":
    main()
