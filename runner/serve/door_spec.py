"""``Door``: what a protocol door of ``runner serve`` is (its routes, an optional lifespan, its paths).

A module of its own so a door module can build one without importing ``doors.py``, which imports
every door (``open_doors``).
"""

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
