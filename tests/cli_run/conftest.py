"""Fixtures for running the installed `runner` command against the scripted server."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from runner.testing import ScriptedServer

ROOT = Path(__file__).resolve().parent.parent.parent
RUNNER = str(Path(sys.executable).parent / "runner")


@dataclass
class Cli:
    """Runs `runner` in a subprocess with RUNNER_HOME in a temporary folder."""

    home: Path
    cwd: Path
    env: dict[str, str]

    def __call__(
        self,
        *args: str,
        input: str | None = None,
        timeout: float = 60,
        extra_env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        env = {**self.env, **(extra_env or {})}
        return subprocess.run(
            [RUNNER, *args],
            cwd=self.cwd,
            env=env,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def popen(self, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        env = {**self.env, **(extra_env or {})}
        return subprocess.Popen(
            [RUNNER, *args],
            cwd=self.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def transcripts(self) -> list[Path]:
        return sorted((self.home / "sessions").glob("*.jsonl"))


@pytest.fixture
def path_kind() -> str:
    """How the command reaches the OpenAI-compatible endpoint: the httpx fast path by default.

    A few end-to-end tests run on both paths (``@both_paths``); each litellm run costs seconds of
    import, and the in-process wire tests (tests/models) hold both paths to the same behaviour.
    """
    return "fast"


#: Run a test on the fast path and on litellm (``RUNNER_FAST_PATH=0``).
both_paths = pytest.mark.parametrize("path_kind", ["fast", "litellm"])


@pytest.fixture
def cli(tmp_path: Path, path_kind: str) -> Cli:
    env = dict(os.environ)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RUNNER_MODEL", "RUNNER_DEFAULT_MODEL"):
        env.pop(name, None)
    env.update(
        RUNNER_HOME=str(tmp_path / "home"),
        RUNNER_FAST_PATH="1" if path_kind == "fast" else "0",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        NO_COLOR="1",
    )
    return Cli(home=tmp_path / "home", cwd=tmp_path, env=env)


@pytest.fixture
def serve(scripted_server: Callable[..., ScriptedServer]) -> Callable[..., ScriptedServer]:
    """``serve(script, repeat=False)``: a ScriptedServer, closed at the end (the plugin's fixture)."""
    return scripted_server


def write_agent(folder: Path, body: str, *, tools: str | None = None, name: str = "agent.yaml") -> Path:
    """An agent file (and optionally a `tools_mod.py` beside it)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(body, encoding="utf-8")
    if tools is not None:
        (folder / "tools_mod.py").write_text(tools, encoding="utf-8")
    return path
