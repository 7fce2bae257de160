"""The protocol doors of ``runner serve`` beside Chat Completions, each a small module of its own.

A door is routes on the one app (behind the same ``HostGuard``, CORS and ``ServeState.authorize``
as ``/v1/chat/completions``) and, when it needs one, a lifespan the app enters at start-up and
leaves at shutdown (an MCP session manager, a task store). Each door runs agents and workflows
through the runnable layer (``runner.runnable``) and reports through its ``Outcome``; none of them
decides by itself what a model name runs.

``open_doors`` lists them in the order their routes are tried. A door module exports
``door(state) -> Door`` and is imported here only, so ``app.py`` knows no protocol but its own.
``Door`` is defined in ``door_spec.py`` (re-exported here), so a door module imports it without
importing this module back.
"""

from __future__ import annotations

from runner.serve.door_spec import Door
from runner.serve.state import ServeState

__all__ = ["Door", "open_doors"]


def open_doors(state: ServeState) -> list[Door]:
    """Every door beside Chat Completions, built on ``state``."""
    from runner.serve.a2a.door import door as a2a_door
    from runner.serve.mcp.door import door as mcp_door
    from runner.serve.metrics import door as metrics_door
    from runner.serve.responses import door as responses_door

    doors: list[Door] = []
    doors.append(responses_door(state))
    doors.append(mcp_door(state))
    doors.append(a2a_door(state))
    doors.append(metrics_door(state))
    return doors
