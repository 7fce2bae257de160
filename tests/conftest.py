"""Suite-wide guards: no test may reach a real provider (or anything off this machine), transcripts
valid, and nothing written into the checkout (every test's ``RUNNER_HOME`` is a temporary folder)."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

#: The checkout's own runner folder, where ``runner`` writes when ``RUNNER_HOME`` is not set.
CHECKOUT_HOME = Path(__file__).resolve().parents[1] / ".runner"
_CHECKOUT_BEFORE = pytest.StashKey[dict[str, tuple[int, int]]]()

# Bytecode is written for the suite even where the machine's environment says not to
# (PYTHONDONTWRITEBYTECODE=1 here): otherwise each xdist worker rewrites and compiles every test module
# again (about 8 s of collection per worker) and every CLI subprocess compiles runner/ again (about
# 0.4 s each). The xdist workers and the subprocesses inherit this environment. ``__pycache__`` is
# ignored by git and left out of the built packages.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
for _name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_BASE_URL", "RUNNER_MODEL"):
    os.environ.pop(_name, None)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject.toml's addopts): one worker more than the machine has cores.

    Much of the suite waits rather than computes: on CLI and peer subprocesses, Ray's processes,
    Chromium, servers' timeouts. On this project's 2-core machines the README's command took 260 s
    with 2 workers, 227 s with 3 and 220 s with 4 (2026-12-03, idle; 287 / 335 / 351 s of CPU):
    a third worker fills the waits, a fourth mostly adds CPU.
    """
    return (os.cpu_count() or 1) + 1


_BUILT: dict[int, tuple[Any, Any]] = {}


def command_of(app: Any) -> Any:
    """The click command of a typer app, built once per app.

    typer's ``CliRunner.invoke`` builds the click command from the app on every call (about 35 ms
    of signature reading, more than ``runner validate`` itself takes); the suite's CLI calls (typer's
    ``CliRunner`` and ``tests/cli_run``'s in-process runner) share one. The command holds no state
    between invocations (click's own tests reuse one).
    """
    from typer.main import get_command

    entry = _BUILT.get(id(app))
    if entry is None or entry[0] is not app:
        entry = _BUILT[id(app)] = (app, get_command(app))
    return entry[1]


def _command_built_once() -> None:
    import typer.testing

    typer.testing._get_command = command_of  # type: ignore[attr-defined]


_command_built_once()

# The no-network guard is runner's pytest plugin (runner.testing.pytest_plugin), switched on for every
# test by ``runner_no_network = true`` in pyproject.toml: users' agent tests get the same one.


@pytest.fixture(scope="session")
def _runner_homes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder under which each test gets a ``RUNNER_HOME`` of its own."""
    return tmp_path_factory.mktemp("runner-homes")


@pytest.fixture(autouse=True)
def _runner_home_in_a_temporary_folder(monkeypatch: pytest.MonkeyPatch, _runner_homes: Path) -> None:
    """Every test's sessions, caches and transcripts go to a temporary folder, never ``./.runner``.

    The folder is created when the runner first writes there. A test that sets ``RUNNER_HOME``
    itself (``monkeypatch.setenv``, a subprocess ``env``) still wins.
    """
    monkeypatch.setenv("RUNNER_HOME", str(_runner_homes / uuid.uuid4().hex))


def checkout_files() -> dict[str, tuple[int, int]]:
    """Every file under the checkout's ``.runner/`` with its size and modification time."""
    if not CHECKOUT_HOME.is_dir():
        return {}
    return {
        str(path.relative_to(CHECKOUT_HOME)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in CHECKOUT_HOME.rglob("*")
        if path.is_file()
    }


def pytest_sessionstart(session: pytest.Session) -> None:
    """Note what the checkout's ``.runner/`` holds before the suite runs (see pytest_sessionfinish)."""
    if not hasattr(session.config, "workerinput"):  # the controller (or the only process) checks
        session.config.stash[_CHECKOUT_BEFORE] = checkout_files()


def _invalid_transcripts(root: Any) -> list[str]:
    """Every record of every transcript under ``root`` checked against schemas/transcript.schema.json."""
    import json
    from pathlib import Path

    from jsonschema import Draft202012Validator

    from runner.resources import load_schema

    validator = Draft202012Validator(load_schema("transcript"))
    problems = []
    for path in Path(root).rglob("sessions/*.jsonl"):
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                if number == len(lines):
                    continue  # a torn last line: what a kill -9 mid-write leaves, by design
                problems.append(f"{path}:{number}: not JSON")
                continue
            if number == 1 and record.get("type") != "header":
                problems.append(f"{path}:1: the first record is not a header")
            for error in validator.iter_errors(record):
                problems.append(f"{path}:{number}: {error.message}")
    return problems


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Validate every transcript the suite wrote (SPEC section 12); a bad one fails the run, and so
    does a file the suite wrote or changed under the checkout's own ``.runner/``."""
    _check_checkout_untouched(session)
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None:
        return
    try:
        root = factory.getbasetemp()
    except (OSError, ValueError):
        return
    problems = _invalid_transcripts(root)
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"{len(problems)} transcript record(s) violate transcript.schema.json:", red=True
            )
            for problem in problems[:20]:
                reporter.write_line("  " + problem, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _check_checkout_untouched(session: pytest.Session) -> None:
    before = session.config.stash.get(_CHECKOUT_BEFORE, None)
    if before is None:
        return
    after = checkout_files()
    changed = sorted(name for name, stamp in after.items() if before.get(name) != stamp)
    if not changed:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(
            f"the suite wrote {len(changed)} file(s) into the checkout's {CHECKOUT_HOME}:", red=True
        )
        for name in changed[:20]:
            reporter.write_line("  " + name, red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
