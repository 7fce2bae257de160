"""Run every benchmark: ``python -m bench`` (each one also runs alone: ``python -m bench.NAME``)."""

from __future__ import annotations

import shutil

from bench import loop, openapi_convert, output, reload, startup

results = [startup.main([]), loop.main([]), reload.main([]), openapi_convert.main([]), output.main([])]
if shutil.which("node"):
    from bench import mcp_overhead

    results.append(mcp_overhead.main([]))
raise SystemExit(max(results))
