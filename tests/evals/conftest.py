"""Fixtures of the eval tests: the installed `runner` against the scripted server (tests/cli_run's)."""

from __future__ import annotations

from tests.cli_run.conftest import cli, path_kind, serve

__all__ = ["cli", "path_kind", "serve"]
