"""Tools: the ``Tool`` shape, the registry, schema hygiene, permissions, execution and the sources.

Module map:

- ``base``: ``Tool``, ``ToolResult``, ``RunContext``; ``registry``: names, collisions, order;
  ``schema``: schema hygiene; ``docstrings``: parameter text from docstrings.
- ``sources``: the loader signature and ``SourceContext``; one module per kind: ``python``,
  ``openapi`` (+ ``openapi_spec``, ``openapi_convert``), ``mcp`` (+ ``mcp_client``), ``builtin``
  (the ``toolsets`` package), ``agent`` (given its factory by the session layer).
- ``executor``: one call parsed, validated, run with a timeout, always one result; ``bounded``:
  awaiting tools and hooks that misbehave (``KeyboardInterrupt``, swallowed cancellation);
  ``capture``: what they print goes to stderr.
- ``permissions``: allow / ask / deny rules; ``shellwords`` (+ ``shellparse``, ``shellscan``,
  ``shellsyntax``, ``holeglob``): a command line read as ``/bin/sh`` reads it.
- ``procs`` (+ ``reaper``): child processes that cannot outlive their call or read the runner's
  secrets; ``threads``: worker threads for sync tools and blocking model calls.

This package imports nothing at the top (``runner validate`` stays fast); modules are imported by
what uses them.
"""
