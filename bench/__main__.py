"""Run every benchmark: ``python -m bench``."""

from __future__ import annotations

from bench import startup

results = [startup.main([])]
raise SystemExit(max(results))
