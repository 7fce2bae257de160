"""Other MCP clients against the door: the MCP Inspector's CLI mode (over stdio and HTTP) and the MCP
conformance suite's server scenarios that apply to a server of agents (docs/mcp-server.md says why
the others do not)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.mcp_server.conftest import PEERS, ROOT, Agents, echo, runner_env

INSPECTOR = PEERS / ".bin" / "mcp-inspector"
CONFORMANCE = PEERS / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
#: conformance 0.1.x imports fs.globSync (Node 22+); this hook lets it run on Node 20.
NODE20 = Path(__file__).with_name("node20_register.mjs")

#: The server scenarios that apply: the handshake, ping, the tool listing, several SSE streams at
#: once, resumable SSE (only SHOULDs, reported as warnings: no event store), DNS rebinding.
SCENARIOS = (
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "server-sse-polling",
    "dns-rebinding-protection",
)

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not INSPECTOR.exists(), reason="needs node and tests/peers (npm ci)"
)


def _node_env(tmp_path: Path, home: Path) -> dict[str, str]:
    env = runner_env(home)
    env.update(HOME=str(tmp_path / "node-home"), MCP_CATALOG_PATH=str(tmp_path / "inspector.json"))
    return env


def _inspector(args: list[str], env: dict[str, str]) -> Any:
    done = subprocess.run(
        [str(INSPECTOR), "--cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_the_inspector_lists_and_calls_over_stdio(
    agents: Agents, scripted_server: Callable[..., Any], tmp_path: Path, home: Path
) -> None:
    agents.write("helper", scripted_server(echo, repeat=True), "description: Helps.")
    env = _node_env(tmp_path, home)
    # the inspector gives the server only a default environment, plus what -e names
    chosen = ("RUNNER_HOME", "PYTHONPATH", "SCRIPTED_API_KEY")
    command = [
        *(f"-e{name}={env[name]}" for name in chosen),
        "--",
        sys.executable,
        "-m",
        "runner",
        "mcp",
        str(agents.root),
    ]
    listed = _inspector(["--method", "tools/list", *command], env)
    called = _inspector(
        ["--method", "tools/call", "--tool-name", "helper", "--tool-arg", "message=hello there", *command],
        env,
    )
    (tool,) = listed["tools"]
    assert tool["name"] == "helper" and tool["description"] == "Helps."
    assert tool["annotations"]["readOnlyHint"] is True
    assert called["content"][0]["text"] == "heard: hello there"
    assert called["structuredContent"]["response"] == "heard: hello there"
    assert called.get("isError") is not True


def test_the_inspector_calls_over_http(
    agents: Agents, scripted_server: Callable[..., Any], serve: Callable[..., Any], tmp_path: Path, home: Path
) -> None:
    agents.write("helper", scripted_server(echo, repeat=True))
    served = serve([agents.root], api_keys=["key-a"])
    env = _node_env(tmp_path, home)
    target = [served.mcp_url, "--transport", "http", "--header", "Authorization: Bearer key-a"]
    called = _inspector(
        [*target, "--method", "tools/call", "--tool-name", "helper", "--tool-arg", "message=hi"], env
    )
    assert called["content"][0]["text"] == "heard: hi"
    refused = subprocess.run(
        [str(INSPECTOR), "--cli", "--method", "tools/list", served.mcp_url, "--transport", "http"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=50,
        check=False,
    )
    # a 401 with WWW-Authenticate: Bearer: the inspector asks for credentials (OAuth) instead
    assert refused.returncode != 0 and "auth_required" in refused.stdout + refused.stderr


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_conformance_scenario(
    scenario: str,
    agents: Agents,
    scripted_server: Callable[..., Any],
    serve: Callable[..., Any],
    tmp_path: Path,
    home: Path,
) -> None:
    agents.write("helper", scripted_server(echo, repeat=True))
    # the suite sends Origin: http://127.0.0.1:PORT and expects it answered: runner answers no
    # browser origin unless it is allowed (--allow-origin), so the test allows the server's own
    served = serve([agents.root], allow_own_origin=True)
    out = tmp_path / "results"
    done = subprocess.run(
        [
            "node",
            "--import",
            str(NODE20),
            str(CONFORMANCE),
            "server",
            "--url",
            served.mcp_url,
            "--scenario",
            scenario,
            "--output-dir",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=_node_env(tmp_path, home),
        cwd=ROOT,
        timeout=50,
        check=False,
    )
    checks = [check for path in out.rglob("checks.json") for check in json.loads(path.read_text())]
    assert checks, done.stdout[-3000:]
    failed = [check for check in checks if check["status"] == "FAILURE"]
    assert not failed, json.dumps(failed, indent=1)[:3000]
    assert done.returncode == 0, done.stdout[-3000:]
    assert any(check["status"] == "SUCCESS" for check in checks) or scenario == "server-sse-polling"
