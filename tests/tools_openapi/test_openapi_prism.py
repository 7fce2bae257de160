"""A real published spec (OAI's petstore-expanded.yaml) served by a real mock server (Stoplight Prism).

Prism validates every request against the spec, so a call that passes proves the tools send what
the document declares: path and query parameters in the right style, the JSON body under its media
type. Prism comes from ``tests/peers`` (``npm ci --prefix tests/peers``; installed here if missing).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from runner.errors import ToolError
from runner.tools.base import RunContext, Tool
from runner.tools.openapi import load_source
from runner.tools.sources import SourceContext

from .conftest import ROOT, SPECS, MakeSource, closed_port

# the module's prism is started once: all its tests on one worker (xdist loadgroup)
pytestmark = pytest.mark.xdist_group("prism")

PEERS = ROOT / "tests" / "peers"
PRISM = PEERS / "node_modules" / ".bin" / "prism"
SPEC = SPECS / "petstore-expanded.yaml"
CTX = RunContext(session_id="s1", agent="tester")


def _install_peers() -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the Prism mock server of tests/peers needs Node.js and npm")
    subprocess.run([npm, "ci", "--prefix", str(PEERS)], check=True, capture_output=True, timeout=600)


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path, *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"prism exited with {process.returncode}:\n{log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)  # polling an observable state, bounded by the deadline
    raise RuntimeError(
        f"prism did not listen on port {port} within {timeout_s:g} s:\n{log.read_text()[-2000:]}"
    )


@pytest.fixture(scope="module")
def prism(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``prism mock`` of the petstore spec on a free loopback port; its base URL."""
    if not PRISM.exists():
        _install_peers()
    port = closed_port()
    log = tmp_path_factory.mktemp("prism") / "prism.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(PRISM), "mock", "-h", "127.0.0.1", "-p", str(port), str(SPEC)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        _wait_for_port(port, process, log, timeout_s=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture
async def tools(
    prism: str, make_source: MakeSource, source_ctx: SourceContext
) -> AsyncIterator[dict[str, Tool]]:
    """The spec's tools, read from the committed file, calling Prism."""
    spec = make_source(str(SPEC), id="petstore", base_url=prism)
    async with AsyncExitStack() as stack:
        loaded = await load_source(spec, source_ctx, stack)
        yield {tool.name: tool for tool in loaded.tools}


async def test_published_spec_converts_to_one_tool_per_operation(tools: dict[str, Tool]) -> None:
    assert list(tools) == ["findPets", "addPet", "find_pet_by_id", "deletePet"]
    assert tools["addPet"].parameters == {
        "type": "object",
        "properties": {"name": {"type": "string"}, "tag": {"type": "string"}},
        "required": ["name"],
    }
    assert tools["findPets"].parameters["properties"]["tags"] == {
        "type": "array",
        "description": "tags to filter by",
        "items": {"type": "string"},
    }
    assert tools["find_pet_by_id"].parameters["required"] == ["id"]
    assert tools["findPets"].description.startswith("Returns all pets from the system")


async def test_calls_pass_prism_request_validation(tools: dict[str, Tool]) -> None:
    pet = json.loads(await tools["find_pet_by_id"].call({"id": 7}, CTX))
    assert set(pet) == {"id", "name", "tag"}
    pets = json.loads(await tools["findPets"].call({"tags": ["dog", "cat"], "limit": 2}, CTX))
    assert isinstance(pets, list) and set(pets[0]) >= {"id", "name"}
    added = json.loads(await tools["addPet"].call({"name": "Rex", "tag": "dog"}, CTX))
    assert isinstance(added["id"], int) and isinstance(added["name"], str)
    assert await tools["deletePet"].call({"id": 1}, CTX) == "HTTP 204 No Content (no content)"


async def test_requests_prism_rejects_are_tool_errors(tools: dict[str, Tool]) -> None:
    # Prism answers 422 with the spec's `default` Error response when a request breaks the spec.
    error = r'answered HTTP 422 Unprocessable Entity: \{"code":-?\d+,"message":"[^"]*"\}$'
    with pytest.raises(ToolError, match=rf"^GET /pets/abc {error}"):
        await tools["find_pet_by_id"].call({"id": "abc"}, CTX)  # the executor would refuse this first
    with pytest.raises(ToolError, match=rf"^POST /pets {error}"):
        await tools["addPet"].call({"tag": "no name"}, CTX)
