"""Fixtures for the model tests: scripted servers on loopback and both real wire paths."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from runner.models.base import Model
from runner.testing import ScriptedServer

PATHS = ("litellm", "openai_compat")


@pytest.fixture
def serve(scripted_server: Callable[..., ScriptedServer]) -> Callable[..., ScriptedServer]:
    """Scripted servers on 127.0.0.1, closed after the test (the plugin's ``scripted_server``)."""
    return scripted_server


@pytest.fixture(params=PATHS)
async def connect(request: pytest.FixtureRequest) -> AsyncIterator[Callable[..., Model]]:
    """Build a real model (litellm or the httpx fast path) for a base URL; both run the same tests."""
    models: list[Model] = []

    def make(
        base_url: str,
        model_id: str = "openai/scripted-model",
        api_key: str | None = "sk-test",
        timeout_s: float = 120.0,
    ) -> Model:
        model: Model
        if request.param == "litellm":
            from runner.models.litellm_model import LiteLLMModel

            model = LiteLLMModel(model_id, api_base=base_url, api_key=api_key, timeout_s=timeout_s)
        else:
            from runner.models.openai_compat import OpenAICompatModel

            model = OpenAICompatModel(model_id, api_base=base_url, api_key=api_key, timeout_s=timeout_s)
        models.append(model)
        return model

    yield make
    for model in models:
        await model.aclose()


@pytest.fixture
def closed_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ----------------------------------------------------------------- third-party fault servers
#
# llmock (PyPI) runs in this process on 127.0.0.1 (its pytest plugin's ``llmock`` fixture: one server
# per xdist worker, reset for every test); aimock (npm, tests/peers) runs as a node process.

ROOT = Path(__file__).resolve().parent.parent.parent
PEERS = ROOT / "tests" / "peers"
AIMOCK = PEERS / "node_modules" / "@copilotkit" / "aimock" / "dist" / "cli.js"


def _install_peers() -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the aimock server of tests/peers needs Node.js and npm")
    subprocess.run([npm, "ci", "--prefix", str(PEERS)], check=True, capture_output=True, timeout=600)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path, *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"aimock exited with {process.returncode}:\n{log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)  # polling an observable state, bounded by the deadline
    raise RuntimeError(f"aimock did not listen on port {port} within {timeout_s:g} s:\n{log.read_text()}")


@pytest.fixture(scope="module")
def aimock_reset(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """aimock on a free loopback port, destroying every connection before its first byte; its URL."""
    if not AIMOCK.exists():
        _install_peers()
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the aimock server of tests/peers needs Node.js")
    folder = tmp_path_factory.mktemp("aimock")
    fixtures = folder / "fixtures.json"
    fixtures.write_text(json.dumps({"fixtures": [{"match": {}, "response": {"content": "never sent"}}]}))
    port = _free_port()
    log = folder / "aimock.log"
    command = [node, str(AIMOCK), "-h", "127.0.0.1", "-p", str(port), "-f", str(fixtures)]
    command += ["--chaos-disconnect", "1", "--log-level", "warn"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        _wait_for_port(port, process, log, timeout_s=30)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture
def notices() -> Iterator[list[str]]:
    """What the models layer announces (retries, waits) during the test."""
    from runner.models import notices as model_notices

    heard: list[str] = []
    with model_notices.listening(heard.append):
        yield heard
