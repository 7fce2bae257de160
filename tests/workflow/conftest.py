"""Fixtures for running workflows through the installed `runner` command."""

from __future__ import annotations

from tests.workflow.helpers import cli

__all__ = ["cli"]
