"""Tools: the ``Tool`` shape, the registry, schema hygiene, permissions, execution and the sources.

Module map:

- ``base``: ``Tool``, ``ToolResult``, ``RunContext``; ``registry``: names, collisions, order;
  ``schema``: schema hygiene; ``docstrings``: parameter text from docstrings.
- ``sources``: the loader signature and ``SourceContext``; one module per kind: ``python``,
  ``openapi`` (+ ``openapi_spec``, ``openapi_convert``), ``mcp`` (+ ``mcp_client``), ``builtin``
  (the ``toolsets`` package), ``agent`` (given its factory by the session layer).
- ``executor``: one call parsed, validated, run with a timeout, always one result.
- ``permissions`` (+ ``shellwords``): allow / ask / deny rules; ``threads``: worker threads for
  sync tools and blocking model calls.

This package imports nothing at the top (``runner validate`` stays fast); modules are imported by
what uses them.
"""
