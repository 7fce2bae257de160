"""The A2A door of ``runner serve``: every served agent and workflow is an A2A agent (docs/a2a.md).

Its routes are ``serving.py``'s, on the ``a2a-sdk`` (the extra ``runner[a2a]``). Without the SDK
installed the door still answers its paths, each with a 501 that says what to install, so a
server without it starts as before.
"""

from __future__ import annotations

import importlib.util

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from runner.serve.door_spec import Door
from runner.serve.protocol import ApiError
from runner.serve.state import ServeState

__all__ = ["PATHS", "door"]

PATHS = ("/a2a", "/a2a/NAME", "/.well-known/agent-card.json")


def door(state: ServeState) -> Door:
    """The A2A door on ``state``: the SDK's routes, or 501s without the SDK."""
    if importlib.util.find_spec("a2a") is not None:
        from runner.serve.a2a.serving import door_routes

        return door_routes(state)

    async def missing(request: Request) -> Response:
        state.authorize(request)
        raise ApiError(
            501,
            "A2A is not installed in this runner: pip install 'runner[a2a]' (the a2a-sdk)",
            type="server_error",
            code="not_implemented",
        )

    routes = [
        Route("/a2a", missing, methods=["GET"]),
        Route("/.well-known/agent-card.json", missing, methods=["GET"]),
        Route("/a2a/{rest:path}", missing, methods=["GET", "POST"]),
    ]
    return Door(name="a2a", routes=routes, paths=PATHS)
