"""`runner --help`, `validate`, `schema` and `render` must not import the heavy modules (SPEC section 14)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("litellm", "httpx", "mcp", "starlette", "openai", "pydantic", "uvicorn", "ray")


def _imported_modules(*args: str) -> set[str]:
    return {name.split(".")[0] for name in _run(*args)[0]}


def _run(*args: str) -> tuple[set[str], str]:
    """The modules ``runner ARGS`` imported (dotted names), and what it printed on stdout."""
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
            names.add(line.rsplit("|", 1)[1].strip())
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


def _runner_packages(modules: set[str]) -> set[str]:
    """``runner.X`` for every module of the runner's package X (or top-level module) imported."""
    return {".".join(name.split(".")[:2]) for name in modules if name.startswith("runner.")}


def test_help_imports_only_the_cli_and_the_leaf_modules() -> None:
    # issue 23 item 20: the output guard pulled in the agent-file package and the transcript store
    # (cli/guard.py -> store/transcript.py -> agentfile/revisions.py), and the exit path the worker
    # threads (asyncio); --help needs none of them
    modules = _run("--help")[0]
    assert _runner_packages(modules) == {
        "runner.cli",
        "runner.errors",
        "runner.redact",
        "runner.text",
        "runner.version",
    }
    assert sorted({"asyncio", "yaml", "jsonschema", "jinja2"} & modules) == []


def test_validate_imports_the_agent_file_package_but_no_runtime() -> None:
    # validate reads agent files (and the packaged schema), nothing that runs an agent
    examples = sorted(str(p) for p in (ROOT / "examples").glob("*.yaml"))
    modules = _run("validate", *examples)[0]
    assert _runner_packages(modules) <= {
        *("runner.cli", "runner.errors", "runner.redact", "runner.text", "runner.version"),
        *("runner.agentfile", "runner.resources", "runner.tools"),
    }
    assert "runner.agentfile.config" in modules  # the parser works: validate does build configurations
    assert sorted({"asyncio", "runner.tools.threads"} & modules) == []


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
