"""The served agents as MCP tools: ``runner mcp`` (stdio) and ``/mcp`` on ``runner serve`` (HTTP).

    tools.py   one tool per agent and workflow: name, description, input/output schema, annotations
    calls.py   one tools/call: arguments, the conversation a session_id continues, the run, the result
    server.py  the official mcp SDK's low-level Server over those (both protocol generations)
    door.py    /mcp on runner serve: authorized, the SDK's session manager in the door's lifespan
    stdio.py   runner mcp: the same server on stdin/stdout
    changes.py under --watch: tools/list_changed to connected clients when a reload changed the tools

Imports the ``mcp`` SDK: only ``runner mcp``, ``runner serve`` and tests import this package.
"""
