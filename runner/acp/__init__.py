"""``runner acp``: an agent for editors (Zed, JetBrains) over the Agent Client Protocol, v1, on the
official ``agent-client-protocol`` SDK.

- ``agent``: ``RunnerAgent``, the ACP agent side: sessions, prompt turns, permissions, cancel, load,
  modes (a team file's members).
- ``mapping``: pure translations (content blocks → input, loop events → ``session/update``s, the
  todo list → a ``plan``, an ``Outcome`` → a ``stopReason``).
- ``sessions``: a session's configuration (the editor's folder, its MCP servers), the shared
  runtime hosts, the ordered updates.
- ``stdio``: the protocol alone on stdout.

The SDK is imported only here, and this package only by the ``runner acp`` command.
"""

from __future__ import annotations

from runner.acp.agent import RunnerAgent
from runner.acp.stdio import protocol_stdout, serve_stdio

__all__ = ["RunnerAgent", "protocol_stdout", "serve_stdio"]
