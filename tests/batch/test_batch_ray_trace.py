"""`runner batch --backend ray --otel`: the Ray workers' spans continue the driver's batch trace (here, beside
the other Ray tests, so that it shares their cluster)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tests.batch.conftest import RayCluster
from tests.batch.helpers import adder, check_batch_trace, make_agent, write_inputs
from tests.cli_run.conftest import Cli
from tests.telemetry.receiver import otlp_receiver

if importlib.util.find_spec("ray") is None:
    pytest.skip(
        "ray is not installed (the project's ray extra: pip install -e '.[ray]')", allow_module_level=True
    )
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]  # one cluster, one worker


def test_ray_workers_continue_the_drivers_trace(
    cli: Cli, serve: Any, tmp_path: Path, ray_cluster: RayCluster
) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", ["one", "two"])
    with otlp_receiver() as receiver:
        done = cli(
            "batch", str(agent), str(inputs), "-o", "out.jsonl", "--backend", "ray",
            "--address", ray_cluster.address, "--otel",
            extra_env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}, timeout=180,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        spans = list(receiver.spans)
    check_batch_trace(spans, 2)
