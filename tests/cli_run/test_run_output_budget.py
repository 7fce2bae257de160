"""`runner run` with ``output:`` and answers built to break the check (issue 23), the installed command.

An answer nested 1,000 levels ended the run with "internal error: RecursionError"; it is an answer
that does not match like any other: the model is told and tries again, and the run ends with the
object (or, after the retries, exit code 1 with one clear line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli_run.conftest import Cli, write_agent

SCHEMA = {"type": "object", "properties": {"tags": {"type": "array"}}, "required": ["tags"]}


def agent_yaml(base_url: str, *, extra: str = "") -> str:
    return (
        "version: 1\nname: tagger\nmodel:\n  id: openai/scripted\n"
        f"  api_base: {base_url}\n  api_key: ${{TEST_API_KEY:-sk-none}}\n  retries: 0\n"
        f"output: {json.dumps(SCHEMA)}\n{extra}"
    )


def deep(levels: int) -> str:
    return '{"tags": ' + "[" * levels + "]" * levels + "}"


def test_a_deeply_nested_answer_is_repaired(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"content": deep(1000)}, {"content": deep(300)}, {"content": '{"tags": ["a"]}'}])
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url))
    result = cli("run", str(agent), "-p", "Tags?")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"tags": ["a"]}
    assert "internal error" not in result.stderr and "RecursionError" not in result.stderr
    first, second = (r["messages"][-1]["content"] for r in server.requests[1:])
    assert "the JSON nests arrays and objects too deeply to read" in first
    assert "the answer nests arrays and objects more than 100 levels deep" in second


def test_deeply_nested_answers_to_the_end_are_one_clear_error(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([{"content": deep(1000)}])
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url, extra="limits:\n  output_retries: 0\n"))
    result = cli("run", str(agent), "-p", "Tags?")
    assert result.returncode == 1, result.stderr
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "after 1 try" in error and "too deeply to read" in error
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
