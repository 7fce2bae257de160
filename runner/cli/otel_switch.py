"""``--otel`` of ``runner run``, ``serve``, ``batch``, ``mcp`` and ``acp``: the flag, or ``RUNNER_OTEL``
(also in ``.env``)."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["OtelOption", "start_telemetry"]

#: The ``--otel`` option of every command that runs agents.
OtelOption = Annotated[
    bool,
    typer.Option(
        "--otel",
        help="Export traces and metrics over OTLP (OTEL_EXPORTER_OTLP_ENDPOINT, ...; RUNNER_OTEL).",
    ),
]


def start_telemetry(flag: bool) -> bool:
    """Turn tracing on when the flag or the setting asks (nothing of OpenTelemetry is imported otherwise)."""
    import runner.telemetry as telemetry

    on = flag
    if not on:
        from runner.env_settings import load_settings

        on = load_settings().otel
    return telemetry.setup(on)
