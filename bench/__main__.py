"""Run every benchmark: ``python -m bench``."""

from __future__ import annotations

from bench import loop, startup

results = [startup.main([]), loop.main([])]
raise SystemExit(max(results))
