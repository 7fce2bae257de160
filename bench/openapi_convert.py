"""OpenAPI conversion: time to turn a generated 1,000-operation document into tool plans.

The document has 500 paths, each with a GET (path and query parameters) and a PUT (a JSON body that
refers to one of 20 shared, self-recursive component schemas), like a mid-sized real API. Reported:
the median conversion time (``convert_operations``: ``$ref`` inlining, parameter merging, schema
hygiene) next to the median ``json.loads`` of the same document as a floor measured in the same run.
Run: ``python -m bench.openapi_convert [--runs N] [--operations N]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from runner.tools.openapi_convert import convert_operations
from runner.tools.openapi_spec import OpenApiDocument


def generated_document(operations: int) -> dict[str, Any]:
    """An OpenAPI 3.1 document with ``operations`` operations over shared components."""
    paths: dict[str, Any] = {}
    responses = {"200": {"description": "ok"}}
    for i in range(operations // 2):
        body = {"$ref": f"#/components/schemas/Item{i % 20}"}
        paths[f"/things{i}/{{thingId}}"] = {
            "parameters": [{"$ref": "#/components/parameters/ThingId"}],
            "get": {
                "operationId": f"getThing{i}",
                "summary": f"Get thing {i}",
                "parameters": [
                    {
                        "name": "fields",
                        "in": "query",
                        "schema": {"type": "array", "items": {"type": "string"}},
                    },
                    {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
                ],
                "responses": responses,
            },
            "put": {
                "summary": f"Replace thing {i}",
                "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
                "responses": responses,
            },
        }
    schemas: dict[str, Any] = {
        f"Item{n}": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "description": "The item's name."},
                "size": {"type": "integer", "minimum": 0},
                "tags": {"type": "array", "items": {"type": "string"}},
                "owner": {"$ref": "#/components/schemas/Owner"},
                "parent": {"$ref": f"#/components/schemas/Item{n}"},
            },
        }
        for n in range(20)
    }
    schemas["Owner"] = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}},
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "Generated", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "parameters": {
                "ThingId": {"name": "thingId", "in": "path", "required": True, "schema": {"type": "integer"}}
            },
        },
    }


def _median_s(action: Any, runs: int) -> float:
    action()  # warm-up
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=9, help="timed runs (median; at least 5)")
    parser.add_argument("--operations", type=int, default=1000)
    args = parser.parse_args(argv)
    runs = max(args.runs, 5)
    data = generated_document(args.operations)
    text = json.dumps(data)
    document = OpenApiDocument(data, "http://127.0.0.1/openapi.json", "bench")
    count = len(convert_operations(document))
    convert = _median_s(lambda: convert_operations(document), runs)
    parse = _median_s(lambda: json.loads(text), runs)
    print(f"## OpenAPI conversion ({count} operations, {len(text) / 1024:.0f} KiB JSON, median of {runs})")
    print(f"{'json.loads of the document (floor)':<40} {parse * 1000:8.1f} ms   1.00x")
    print(f"{'convert_operations':<40} {convert * 1000:8.1f} ms  {convert / parse:5.2f}x")
    print(f"{'per operation':<40} {convert / count * 1e6:8.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
