"""``--otel`` of ``runner run``, ``serve`` and ``batch``: the flag, or ``RUNNER_OTEL`` (also in ``.env``)."""

from __future__ import annotations

__all__ = ["start_telemetry"]


def start_telemetry(flag: bool) -> bool:
    """Turn tracing on when the flag or the setting asks (nothing of OpenTelemetry is imported otherwise)."""
    import runner.telemetry as telemetry

    on = flag
    if not on:
        from runner.env_settings import load_settings

        on = load_settings().otel
    return telemetry.setup(on)
