"""Skills through the command: render, tools, audit, and a run that loads a skill and runs its script."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runner.testing import ScriptedServer
from tests.skills.conftest import Invoke, write_agent, write_skill


def _skill_with_script(root: Path) -> Path:
    """The ``hello`` skill; its script writes a marker file beside the agent and prints a greeting."""
    skill = write_skill(root / "skills", "hello")
    script = skill / "scripts" / "hi.sh"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\necho ran > {root / 'ran.txt'}\necho hello from the script\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_render_shows_the_skills_section_and_tools(tmp_path: Path, cli: Invoke) -> None:
    _skill_with_script(tmp_path)
    write_skill(tmp_path / "skills", "notes", description="Takes notes in the team's format.")
    agent = write_agent(tmp_path, "prompts:\n  system: You help.\nskills: true\n")
    result = cli("render", str(agent))
    assert result.exit_code == 0, result.output
    system = result.stdout.split("--- system ---\n", 1)[1].split("--- user ---", 1)[0]
    assert system.startswith("You help.\n\n## Skills\n")
    assert "- hello: Says hello. Use when the user wants a greeting.\n" in system
    assert "- notes: Takes notes in the team's format." in system
    assert "Run scripts/hi.sh" not in result.stdout  # the body waits for skills_load
    assert '"name": "skills_load"' in result.stdout and '"enum": ["hello", "notes"]' in result.stdout


def test_tools_lists_the_skills_and_their_scripts(tmp_path: Path, cli: Invoke) -> None:
    _skill_with_script(tmp_path)
    result = cli("tools", str(write_agent(tmp_path)))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert any(line.startswith("skills_load  ") and "builtin:skills" in line for line in lines)
    assert "skills (1; loaded on demand with skills_load):" in lines
    assert "  hello  skills/hello  Says hello. Use when the user wants a greeting." in lines
    assert "    scripts (run through shell): scripts/hi.sh" in lines


def test_audit_lists_the_skills_their_scripts_and_allowed_tools(tmp_path: Path, cli: Invoke) -> None:
    _skill_with_script(tmp_path)
    write_skill(tmp_path / "skills", "reader", description="Reads.", extra="allowed-tools: Read Grep\n")
    agent = write_agent(tmp_path)
    text = cli("audit", str(agent))
    assert text.exit_code == 0, text.output
    assert "  skills\n" in text.stdout
    assert "skills  hello  skills/hello  scripts (run only through shell): scripts/hi.sh" in text.stdout
    assert (
        "skills  reader  skills/reader  no scripts  allowed-tools (grants nothing): Read Grep" in text.stdout
    )
    report = json.loads(cli("audit", str(agent), "--json").stdout)
    audit = report[0] if isinstance(report, list) else report
    by_name = {s["name"]: s for s in audit["skills"]}
    assert by_name["hello"]["scripts"] == ["scripts/hi.sh"] and by_name["reader"]["allowed_tools"] == [
        "Read",
        "Grep",
    ]
    assert by_name["reader"]["description"] == "Reads."
    assert by_name["hello"]["description"] == "Says hello. Use when the user wants a greeting."
    assert by_name["hello"]["folder"] == str((tmp_path / "skills" / "hello").resolve())


def _agent(tmp_path: Path, server: ScriptedServer, permissions: str) -> Path:
    return write_agent(
        tmp_path,
        "skills: true\ntools:\n  - builtin: shell\n" + permissions,
        model=f"\n  id: openai/scripted\n  api_base: {server.base_url}\n"
        "  api_key: ${TEST_API_KEY:-sk-none}\n  retries: 0",
    )


def _script(script: Path) -> list[dict[str, Any]]:
    return [
        {"tool_calls": [{"name": "skills_load", "arguments": {"name": "hello"}}]},
        {"tool_calls": [{"name": "shell", "arguments": {"command": str(script)}}]},
        {"content": "done"},
    ]


def _tool_results(server: ScriptedServer) -> list[str]:
    return [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]


def test_run_loads_a_skill_and_runs_its_script_when_a_rule_allows_it(
    tmp_path: Path, cli: Invoke, scripted_server: Callable[..., ScriptedServer]
) -> None:
    script = _skill_with_script(tmp_path)
    server = scripted_server(_script(script))
    agent = _agent(
        tmp_path, server, "permissions:\n  allow: ['shell(command=*/skills/hello/scripts/hi.sh)']\n"
    )
    result = cli("run", str(agent), "-p", "greet me")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "done"
    first_system = server.requests[0]["messages"][0]["content"]
    assert "- hello: Says hello" in first_system and "Run scripts/hi.sh" not in first_system
    loaded, ran = _tool_results(server)
    assert loaded.startswith("# Skill: hello") and "Run scripts/hi.sh and repeat what it prints." in loaded
    assert "hello from the script" in ran
    assert (tmp_path / "ran.txt").read_text() == "ran\n"


@pytest.mark.parametrize(
    ("permissions", "answer"),
    [
        ("permissions:\n  deny: ['shell(command=*/scripts/*)']\n", "Denied by the permissions rule"),
        # no rule: the shell asks, and off a terminal without --yes nobody says yes
        ("", "Refused: shell needs the user's confirmation"),
    ],
)
def test_a_skill_script_never_runs_around_the_shell_rules(
    tmp_path: Path,
    cli: Invoke,
    scripted_server: Callable[..., ScriptedServer],
    permissions: str,
    answer: str,
) -> None:
    script = _skill_with_script(tmp_path)
    server = scripted_server(_script(script))
    result = cli("run", str(_agent(tmp_path, server, permissions)), "-p", "greet me")
    assert result.exit_code == 0, result.output
    _, refused = _tool_results(server)
    assert refused.startswith(answer) and "hello from the script" not in refused
    assert not (tmp_path / "ran.txt").exists()
