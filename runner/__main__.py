"""``python -m runner`` is the ``runner`` command."""

from __future__ import annotations

from runner.cli.main import main

main()
