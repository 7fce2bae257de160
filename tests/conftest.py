"""Suite-wide guards: no test may reach a real provider (or anything off this machine)."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
for _name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_BASE_URL", "RUNNER_MODEL"):
    os.environ.pop(_name, None)

_real_connect = socket.socket.connect


def _is_local(address: Any) -> bool:
    if not isinstance(address, tuple):  # AF_UNIX paths
        return True
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if not _is_local(address):
        raise AssertionError(f"a test tried to reach {address!r}: only 127.0.0.1 is allowed")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail any test that opens a connection to something other than loopback."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    yield


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
    """Validate every transcript the suite wrote (SPEC section 12); a bad one fails the run."""
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
