"""Real MCP peers on 127.0.0.1: the npm reference server (stdio, streamable HTTP, SSE), PyPI's
``mcp-server-time`` (stdio) and a scripted stdlib server for the cases they cannot show.

Every wait is bounded and waits for an observable state (a port file written, the port answering),
never a fixed sleep.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from runner.agentfile.config import AgentConfig, McpServerConfig, ToolSourceConfig
from runner.tools.base import RunContext
from runner.tools.sources import SourceContext

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PEERS = ROOT / "tests" / "peers"
EVERYTHING = PEERS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
PRELOAD = HERE / "loopback_preload.cjs"
FAKE_SERVER = HERE / "fake_mcp_server.py"
START_TIMEOUT_S = 30.0


@pytest.fixture(scope="session")
def everything_js() -> Path:
    """The reference server's entry point, installed with ``npm ci`` on first use."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed (needed for @modelcontextprotocol/server-everything)")
    if not EVERYTHING.exists():
        subprocess.run(
            ["npm", "ci", "--prefix", str(PEERS), "--no-audit", "--no-fund", "--loglevel=error"],
            check=True,
            timeout=600,
        )
    return EVERYTHING


@pytest.fixture(scope="session")
def time_server_command() -> str:
    """``mcp-server-time`` from this interpreter's environment (it is in the dev extras)."""
    command = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
    if command is None:
        pytest.skip("mcp-server-time is not installed in this venv (pip install -e '.[dev]')")
    return command


@dataclass
class HttpPeer:
    """A reference server listening on 127.0.0.1; ``url`` is its MCP endpoint."""

    js: Path
    mode: str
    workdir: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.workdir / f"{self.mode}-stderr.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{'sse' if self.mode == 'sse' else 'mcp'}"

    def start(self) -> None:
        """Start (or restart on the same port) and wait until the port answers."""
        port_file = self.workdir / f"{self.mode}.port"
        port_file.unlink(missing_ok=True)
        env = {**os.environ, "PORT": str(self.port), "LOOPBACK_PORT_FILE": str(port_file)}
        with self.log.open("ab") as stderr:
            self.process = subprocess.Popen(
                ["node", "--require", str(PRELOAD), str(self.js), self.mode],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.mode} peer exited: {self.log.read_text(errors='replace')[-2000:]}")
            if port_file.exists() and port_file.read_text().strip():
                self.port = int(port_file.read_text())
                if _port_answers(self.port):
                    return
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"{self.mode} peer did not listen within {START_TIMEOUT_S:g} s")

    def stop(self) -> None:
        """Terminate the server and wait for it (bounded)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def stats(self) -> dict[str, Any]:
        """What the preload counted: sessions opened, requests, the last ``x-test-token``."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/__peer_stats", timeout=5) as response:
            stats: dict[str, Any] = json.load(response)
            return stats


def _port_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def everything_http(everything_js: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpPeer]:
    """One streamable-HTTP reference server for the whole test session."""
    peer = HttpPeer(everything_js, "streamableHttp", tmp_path_factory.mktemp("everything-http"))
    peer.start()
    yield peer
    peer.stop()


@pytest.fixture(scope="session")
def everything_sse(everything_js: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpPeer]:
    """One legacy-SSE reference server for the whole test session."""
    peer = HttpPeer(everything_js, "sse", tmp_path_factory.mktemp("everything-sse"))
    peer.start()
    yield peer
    peer.stop()


@pytest.fixture
def own_http_peer(everything_js: Path, tmp_path: Path) -> Iterator[HttpPeer]:
    """A streamable-HTTP reference server that a test may stop and restart."""
    peer = HttpPeer(everything_js, "streamableHttp", tmp_path)
    peer.start()
    yield peer
    peer.stop()


@dataclass
class Progress:
    """Records ``on_progress`` calls."""

    lines: list[tuple[str, str]] = field(default_factory=list)

    def __call__(self, label: str, message: str) -> None:
        self.lines.append((label, message))


@pytest.fixture
def progress() -> Progress:
    return Progress()


@pytest.fixture
def source_ctx(tmp_path: Path, progress: Progress) -> SourceContext:
    """A source context for an agent file in ``tmp_path``, with a 20 s default timeout."""
    agent = AgentConfig(name="mcp-test", path=tmp_path / "agent.yaml")
    return SourceContext(
        agent=agent,
        default_timeout_s=20.0,
        on_progress=progress,
        logger=logging.getLogger("runner.tools.test"),
    )


@pytest.fixture
def run_ctx(tmp_path: Path) -> RunContext:
    return RunContext(session_id="sess-mcp", agent="mcp-test", workspace=tmp_path)


MakeSpec = Callable[..., ToolSourceConfig]


@pytest.fixture
def make_spec(tmp_path: Path) -> MakeSpec:
    """Build an mcp ``ToolSourceConfig`` from a URL or a command and its arguments."""

    def make(target: str, *args: str, env: dict[str, str] | None = None, **fields: Any) -> ToolSourceConfig:
        if target.startswith("http://"):
            server = McpServerConfig(url=target)
        else:
            server = McpServerConfig(command=target, args=tuple(args), env=dict(env or {}))
        return ToolSourceConfig(kind="mcp", target=target, base_dir=tmp_path, mcp=server, **fields)

    return make


@pytest.fixture
def everything_stdio(everything_js: Path) -> tuple[str, ...]:
    """The command and arguments that start the reference server over stdio."""
    return ("node", str(everything_js), "stdio")


@pytest.fixture
def fake_server(tmp_path: Path) -> tuple[tuple[str, ...], Path]:
    """The scripted server's command, and the file it logs each ``initialize`` to."""
    return (sys.executable, str(FAKE_SERVER)), tmp_path / "initialize.log"


@pytest.fixture
def child_pids() -> Callable[[], set[int]]:
    """A function listing the live (non-zombie) child processes of this test process."""
    return _child_pids


def _child_pids() -> set[int]:
    children: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields_after_name = stat.rsplit(")", 1)[1].split()
        state, ppid = fields_after_name[0], int(fields_after_name[1])
        if ppid == os.getpid() and state != "Z":
            children.add(int(entry.name))
    return children


@pytest.fixture
def unused_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
