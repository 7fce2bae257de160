"""Fixtures for running the `runner` command against the scripted server.

``cli(...)`` runs the command in this process by default — the same typer app, argument parsing,
output guard (secrets redacted on stdout and stderr) and exit code as the console script, with the
test's environment and working folder — because a `runner` process costs about a second of start-up
and these tests make hundreds of runs. ``cli.process(...)`` (and ``cli.popen``) start the installed
console script for what only a real process shows: signals, exit with a stuck worker thread, start-up
imports, the interpreter's own output.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from runner.testing import ScriptedServer
from tests.conftest import command_of

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
        """Run ``runner ARGS`` in this process (pytest-timeout bounds a hang).

        Two kinds of run take a process of their own, as a user's do: the litellm path (litellm keeps
        clients bound to the event loop of the run that made them) and the Ray backend (a driver per
        process).
        """
        env = {**self.env, **(extra_env or {})}
        if env.get("RUNNER_FAST_PATH") == "0" or "ray" in args:
            return self.process(*args, input=input, timeout=timeout, extra_env=extra_env)
        return invoke_in_process(list(args), cwd=self.cwd, env=env, input=input)

    def process(
        self,
        *args: str,
        input: str | None = None,
        timeout: float = 60,
        extra_env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run the installed ``runner ARGS`` in a process of its own."""
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


@contextlib.contextmanager
def _environment(env: dict[str, str], cwd: Path) -> Iterator[None]:
    saved, here = dict(os.environ), os.getcwd()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        os.chdir(here)


DEBUG_ON = ("1", "true", "yes")


def invoke_in_process(
    args: list[str], *, cwd: Path, env: dict[str, str], input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``runner ARGS`` as the console script runs it, in this process: its exit code, stdout, stderr.

    The output guard wraps the captured streams with a fresh set of secrets (the environment's and
    those each command notes), as ``runner.cli.main`` does; an exception that escapes the command is
    a traceback on stderr and exit 1, as an interpreter would print it. Where an event loop already
    runs in this thread (a coroutine test, Playwright's sync API) the command's own ``asyncio.run``
    and signal handlers cannot: it then runs as a process of its own.
    """
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _invoke(args, cwd=cwd, env=env, input=input)
    return subprocess.run(
        [RUNNER, *args], cwd=cwd, env=env, input=input, capture_output=True, text=True, timeout=120
    )


def _invoke(
    args: list[str], *, cwd: Path, env: dict[str, str], input: str | None
) -> subprocess.CompletedProcess[str]:
    from typer.testing import CliRunner

    from runner.cli import common, guard, main
    from runner.cli.helpfmt import debug_anywhere
    from runner.redact import Redactor

    runner = CliRunner()
    command = command_of(main.app)
    with _environment(env, cwd), runner.isolation(input=input) as (out, err, _):
        # the one Secrets object (``output.py`` holds it too), emptied for this run and restored after
        fresh = guard.secrets
        saved_secrets = (fresh._values, fresh.redactor)
        fresh._values, fresh.redactor = set(), Redactor(())
        fresh.from_environment(os.environ)
        saved_debug = common._state["debug"]
        argv = ["runner", *args]
        common._state["debug"] = debug_anywhere(argv) or env.get("RUNNER_DEBUG", "").lower() in DEBUG_ON
        streams = [guard.GuardedStream(sys.stdout, fresh), guard.GuardedStream(sys.stderr, fresh)]
        sys.stdout, sys.stderr = streams
        code = 0
        try:
            command.main(args=argv[1:], prog_name="runner", standalone_mode=True)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            for stream in streams:
                stream.drain()
            fresh._values, fresh.redactor = saved_secrets
            common._state["debug"] = saved_debug
        stdout, stderr = out.getvalue(), err.getvalue()
    decode = lambda data: data.decode("utf-8", "replace").replace("\r\n", "\n")  # noqa: E731
    return subprocess.CompletedProcess([RUNNER, *args], code, decode(stdout), decode(stderr))


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
