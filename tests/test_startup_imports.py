"""`runner --help`, `validate`, `schema` and `render` must not import the heavy modules (SPEC section 14)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("litellm", "httpx", "mcp", "starlette", "openai", "pydantic", "uvicorn", "ray")


def _imported_modules(*args: str) -> set[str]:
    return _run(*args)[0]


def _run(*args: str) -> tuple[set[str], str]:
    """The top-level modules ``runner ARGS`` imported, and what it printed on stdout."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "runner", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode in (0, 2), result.stderr[-2000:]
    names = set()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    assert "typer" in names and "runner" in names  # the parser of importtime output works
    return names, result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("validate", *sorted(str(p) for p in (ROOT / "examples").glob("*.yaml"))),
        ("schema",),
    ],
    ids=["help", "validate", "schema"],
)
def test_command_imports_no_heavy_module(args: tuple[str, ...]) -> None:
    heavy = sorted(set(HEAVY) & _imported_modules(*args))
    assert heavy == [], f"runner {args[0]} imported {heavy}"


def test_render_on_the_fast_path_never_imports_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    # `auto` on an OpenAI-compatible endpoint is decided without litellm (SPEC section 8)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    imported = _imported_modules("render", "examples/weather.yaml")
    assert sorted({"litellm", "mcp", "starlette", "openai", "ray"} & imported) == []


@pytest.mark.parametrize(
    ("model_id", "mode"),
    [
        ("openai/gpt-4o-mini", "native (auto: litellm lists openai/gpt-4o-mini as supporting"),
        ("anthropic/claude-3-5-haiku-latest", "native (auto: the endpoint decides"),
        ("deepseek/deepseek-reasoner", "inline (auto: litellm lists deepseek/deepseek-reasoner without"),
    ],
)
def test_render_without_api_base_decides_auto_without_importing_litellm(
    monkeypatch: pytest.MonkeyPatch, model_id: str, mode: str
) -> None:
    # auto is decided from litellm's data file (runner.models.model_data), not by importing litellm
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("RUNNER_MODEL", model_id)
    imported, out = _run("render", "examples/weather.yaml")
    assert f"# function calling: {mode}" in out
    assert sorted({"litellm", "mcp", "starlette", "openai", "ray"} & imported) == []
