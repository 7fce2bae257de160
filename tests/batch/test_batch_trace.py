"""`runner batch --otel` on the default (asyncio) backend: a ``batch`` span, an item span per input
line beneath it, each item's agent run beneath its item (a real OTLP receiver on 127.0.0.1; the Ray
backend's: ``test_batch_ray_trace.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.batch.helpers import adder, check_batch_trace, make_agent, write_inputs
from tests.cli_run.conftest import Cli
from tests.telemetry.receiver import otlp_receiver


def test_a_batch_is_a_span_with_an_item_span_per_line(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", ["one", "two", "three"])
    with otlp_receiver() as receiver:
        done = cli.process(  # --otel sets up the process's tracing: a process of its own
            "batch", str(agent), str(inputs), "-o", "out.jsonl", "--otel",
            extra_env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        spans = list(receiver.spans)
    check_batch_trace(spans, 3)
