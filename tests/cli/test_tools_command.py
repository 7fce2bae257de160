"""`runner tools --check` and the connection-free source checks of `runner validate`."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from runner.cli.main import app

TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


def test_tools_check_reports_each_source(tmp_path: Path) -> None:
    (tmp_path / "check_tools.py").write_text(TOOLS)
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        "version: 1\nname: c\nmodel: openai/x\ntools:\n  - python: check_tools\n"
        "  - mcp: {command: surely-not-an-mcp-server-command}\n    id: ghost\n"
    )
    result = CliRunner().invoke(
        app, ["tools", str(agent), "--check"], env={"RUNNER_HOME": str(tmp_path / "h")}
    )
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert lines[0].startswith("ok   tools[0] python:check_tools  1 tool: add")
    assert lines[1].startswith("FAIL tools[1] ghost") and "command not found" in lines[1]
    assert lines[-1] == "1 ok, 1 failed"


def test_validate_checks_builtin_options_without_opening_anything(tmp_path: Path) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        "version: 1\nname: b\nmodel: openai/x\ntools:\n"
        "  - builtin: files\n    with: {root: ./ws, max_read_charz: 9}\n"
    )
    result = CliRunner().invoke(app, ["validate", str(agent)])
    assert result.exit_code == 2
    assert (
        "agent.yaml:5:5: tools[0].with.max_read_charz: builtin toolset 'files': unknown option"
        in result.output
    )
    assert "max_read_chars" in result.output
    assert not (tmp_path / "ws").exists()  # nothing was opened or created


def _spec(server_url: str) -> dict[str, object]:
    return {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": server_url}],
        "paths": {"/ping": {"get": {"operationId": "ping", "responses": {"200": {"description": "ok"}}}}},
    }


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_tools_check_connects_to_an_openapi_server_that_is_down(tmp_path: Path) -> None:
    import json

    (tmp_path / "api.json").write_text(json.dumps(_spec(f"http://127.0.0.1:{_closed_port()}")))
    agent = tmp_path / "agent.yaml"
    agent.write_text("version: 1\nname: c\nmodel: openai/x\ntools:\n  - openapi: api.json\n")
    result = CliRunner().invoke(
        app, ["tools", str(agent), "--check"], env={"RUNNER_HOME": str(tmp_path / "h")}
    )
    assert result.exit_code == 2
    assert "FAIL tools[0]" in result.output and "does not answer" in result.output


def test_tools_check_does_not_trust_a_cached_document(tmp_path: Path) -> None:
    import json
    import threading
    from http.server import BaseHTTPRequestHandler

    from runner.testing.server import StoppableHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(_spec(f"http://127.0.0.1:{self.server.server_address[1]}")).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = StoppableHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/openapi.json"
    agent = tmp_path / "agent.yaml"
    agent.write_text(f"version: 1\nname: c\nmodel: openai/x\ntools:\n  - openapi: {url}\n")
    env = {"RUNNER_HOME": str(tmp_path / "h")}
    up = CliRunner().invoke(app, ["tools", str(agent), "--check"], env=env)
    assert up.exit_code == 0, up.output
    server.shutdown()
    server.server_close()
    assert CliRunner().invoke(app, ["tools", str(agent)], env=env).exit_code == 0  # from the cache
    down = CliRunner().invoke(app, ["tools", str(agent), "--check"], env=env)
    assert down.exit_code == 2 and "FAIL tools[0]" in down.output


LONG_FIRST_LINE = (
    "Compute a result from the given number by applying a long series of carefully described steps."
)


def test_the_table_shows_each_tools_summary_cut_at_a_word(tmp_path: Path) -> None:
    (tmp_path / "wordy_tools.py").write_text(
        "def wordy(x: int) -> int:\n"
        f'    """{LONG_FIRST_LINE}\n\n'
        '    The rest of the description, which the table leaves out.\n    """\n    return x\n'
    )
    agent = tmp_path / "agent.yaml"
    agent.write_text("version: 1\nname: c\nmodel: openai/x\ntools:\n  - python: wordy_tools\n")
    result = CliRunner().invoke(app, ["tools", str(agent)], env={"RUNNER_HOME": str(tmp_path / "h")})
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.output.splitlines() if line.startswith("wordy")]
    summary = row.split("python:", 1)[1].split(None, 1)[1]
    assert summary.endswith("…") and "table leaves out" not in row
    assert LONG_FIRST_LINE.startswith(summary[:-1]) and len(summary) <= 80
    assert LONG_FIRST_LINE[len(summary) - 1] == " "  # cut between words


def test_validate_warns_of_an_mcp_command_not_on_path(tmp_path: Path) -> None:
    # issue 23 item 21: validate said ok; the server failed only when a run started it
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        "version: 1\nname: c\nmodel: openai/x\ntools:\n"
        "  - mcp: {command: surely-not-an-mcp-server-command}\n    id: ghost\n"
        "  - mcp: {command: python3}\n"
    )
    result = CliRunner().invoke(app, ["validate", str(agent)])
    assert result.exit_code == 0, result.output  # a warning: the file is valid
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: {agent}:5:20: tools[0].mcp.command: 'surely-not-an-mcp-server-command' is not found"
        " on PATH: this MCP server will not start here (hint: install it, or give its full path;"
        " runner tools --check tries to start it)"
    ]
    assert "ok (c)" in result.output


def test_tools_of_an_agent_without_tools_says_so(tmp_path: Path) -> None:
    # issue 23 item 21: a bare "name  source  description" header
    agent = tmp_path / "agent.yaml"
    agent.write_text("version: 1\nname: c\nmodel: openai/x\n")
    result = CliRunner().invoke(app, ["tools", str(agent)], env={"RUNNER_HOME": str(tmp_path / "h")})
    assert result.exit_code == 0, result.output
    assert result.output == "c has no tools: its file has no `tools:`\n"
