"""``Door``: one protocol's routes and lifespan on ``runner serve`` (a leaf: door modules import it,
``doors.py`` lists the doors)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

from starlette.routing import BaseRoute

__all__ = ["Door"]


@dataclass(frozen=True)
class Door:
    """One protocol's routes and, optionally, what must run while the server does."""

    name: str
    routes: Sequence[BaseRoute] = ()
    lifespan: Callable[[], AbstractAsyncContextManager[None]] | None = None
    #: the paths it answers, for the startup banner and docs/architecture.md's door table
    paths: Sequence[str] = field(default=())
