"""Process-wide settings (SPEC section 10): environment variables ``RUNNER_*`` and ``.env``.

Imported only by commands that need it (pydantic costs ~0.3 s to import; ``runner --help`` and
``runner validate`` stay without it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

__all__ = ["Settings", "load_settings"]


class Settings(BaseSettings):
    """Settings read from ``RUNNER_<NAME>`` variables, then ``./.env``, then the defaults."""

    model_config = SettingsConfigDict(env_prefix="RUNNER_", env_file=".env", extra="ignore")

    home: Path = Field(Path(".runner"), description="Where transcripts and caches are kept.")
    default_model: str | None = Field(None, description="The model of agents that name none.")
    debug: bool = Field(False, description="Show Python tracebacks for errors.")
    log_level: str = Field("WARNING", description="Level of the runner's own log on stderr.")
    openapi_cache_ttl_s: float = Field(3600.0, ge=0, description="How long fetched OpenAPI specs are reused.")
    fsync: bool = Field(False, description="fsync transcripts after every record (durability over speed).")
    local_cost_map: bool = Field(
        True, description="Use litellm's bundled price map instead of fetching it on import."
    )
    fast_path: bool = Field(
        True,
        description="Reach `openai/...` models that have an `api_base` with a thin httpx client instead of "
        "litellm (same behaviour, ~4 s less start-up); false sends every model through litellm.",
    )
    otel: bool = Field(
        False,
        description="Export OpenTelemetry traces and metrics over OTLP, as `--otel` does (configured by "
        "the standard `OTEL_*` variables: `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_SERVICE_NAME`, ...).",
    )
    serve_api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Bearer keys `runner serve` accepts (comma-separated)."
    )
    serve_host: str = Field("127.0.0.1", description="Interface `runner serve` binds.")
    serve_port: int = Field(8000, ge=0, le=65535, description="Port `runner serve` binds.")
    serve_allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Browser origins `runner serve` answers, with CORS (comma-separated, e.g. "
        "`http://localhost:3000`); requests from any other origin are refused with 403.",
    )
    serve_allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Host names `runner serve` answers besides loopback ones (comma-separated); when "
        "set, the Host header is checked even with API keys.",
    )
    serve_tool_details: bool = Field(
        True,
        description="Show each tool call in `runner serve`'s answers as a `<details>` block (Open WebUI "
        "renders them); false answers with the text only (`runner serve --plain`).",
    )
    serve_max_body_bytes: int = Field(
        4 * 1024 * 1024, ge=1024, description="Largest request body `runner serve` reads (413 beyond)."
    )
    serve_max_messages: int = Field(
        5000, ge=1, description="Most messages one request may hold, tool calls included (413 beyond)."
    )
    serve_header_timeout_s: float = Field(
        10.0, gt=0, description="Seconds a client has to send a request's headers before it is disconnected."
    )
    serve_body_timeout_s: float = Field(
        30.0, gt=0, description="Seconds a client has to send a request's body (408 after)."
    )
    serve_max_connections: int = Field(
        100, ge=1, description="Open connections `runner serve` serves at once; more are answered 503."
    )

    @field_validator("serve_api_keys", "serve_allowed_origins", "serve_allowed_hosts", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        """Commas (``k1,k2``) or a JSON list (``["k1", "k2"]``, what pydantic-settings users write)."""
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.startswith("["):
            import json

            try:
                items = json.loads(text)
            except json.JSONDecodeError:
                raise ValueError("starts with '[' but is not a JSON list of strings") from None
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise ValueError("must be a JSON list of strings, or values separated by commas")
            return [i.strip() for i in items if i.strip()]
        items = [k.strip() for k in text.split(",") if k.strip()]
        if any(c in item for item in items for c in '[]"{}'):
            raise ValueError("looks like neither a JSON list nor values separated by commas")
        return items

    @field_validator("log_level")
    @classmethod
    def _upper_level(cls, value: str) -> str:
        level = value.upper()
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
        return level


def load_settings() -> Settings:
    """Read the settings now; invalid values become a ``ConfigError`` naming the variable."""
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from runner.errors import ConfigError

    try:
        return Settings()
    except SettingsError as exc:
        raise ConfigError(f"settings: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "RUNNER_" + str(first["loc"][0]).upper() if first["loc"] else "RUNNER_*"
        raise ConfigError(f"setting {name}: {first['msg']}") from None
