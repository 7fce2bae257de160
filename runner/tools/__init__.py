"""Tools: the ``Tool`` shape, the registry, schema hygiene, permissions, execution and the sources.

The source modules (``python`` here; ``openapi``, ``mcp``, ``builtin``, ``agent`` alongside) each turn
one ``tools:`` entry into a list of ``Tool``; ``ToolRegistry`` names and orders them; ``executor`` runs
the calls of one assistant message.
"""
