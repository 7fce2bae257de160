"""How runtimes are built and where sessions keep their records: one value, from the settings or by hand.

``RuntimeSettings`` is what ``RUNNER_*`` settings (``runner.env_settings``) and the command line decide
for every agent a process runs: the home folder of transcripts and caches, the default model and a
``--model`` override, the fast path, cassettes to record or replay. It is frozen; a caller that
needs another value makes a copy (``dataclasses.replace``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RuntimeSettings"]


@dataclass(frozen=True)
class RuntimeSettings:
    """Process-wide choices that shape every runtime and session."""

    home: Path = Path(".runner")
    fsync: bool = False
    write_transcript: bool = True
    default_model: str | None = None
    model_override: str | None = None
    openapi_cache_ttl_s: float = 3600.0
    refresh_sources: bool = False
    fast_path: bool = True
    #: Record every model call to this cassette (``--record``).
    record: Path | None = None
    #: Answer model calls from this cassette instead of a model (``--replay``).
    replay: Path | None = None
    #: With ``replay``: a request that differs from the recording is an error (else a warning).
    replay_strict: bool = True

    @classmethod
    def from_environment(cls, *, model_override: str | None = None) -> RuntimeSettings:
        """The settings of ``RUNNER_*`` variables and ``.env`` (``runner.env_settings``)."""
        from runner.env_settings import load_settings

        settings = load_settings()
        if settings.local_cost_map:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        return cls(
            home=settings.home,
            fsync=settings.fsync,
            default_model=settings.default_model,
            model_override=model_override,
            openapi_cache_ttl_s=settings.openapi_cache_ttl_s,
            fast_path=settings.fast_path,
        )
