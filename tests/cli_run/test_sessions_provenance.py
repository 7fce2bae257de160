"""Provenance per turn (issue 16, item 5): the configuration each turn ran under, what a reload
changed, and ``runner sessions list --agent NAME --rev REV``."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path
from typing import Any

from runner.agentfile import load_agent
from runner.runtime import RuntimeSettings
from runner.session import Session, runtime_host
from runner.testing import ScriptedModel, text
from tests.cli_run.conftest import Cli

AGENT = """\
version: 1
name: {name}
model: openai/scripted
prompts:
  system: {system}
tools:
  - python: prov_tools
"""
TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''
MORE_TOOLS = (
    TOOLS
    + '''

def mul(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b
'''
)


def write(folder: Path, *, name: str = "calc", system: str = "You add.", tools: str = TOOLS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prov_tools.py").write_text(textwrap.dedent(tools), encoding="utf-8")
    path = folder / "agent.yaml"
    path.write_text(AGENT.format(name=name, system=system), encoding="utf-8")
    return path


async def two_turns_with_a_reload_between(path: Path, home: Path) -> str:
    """Turn 1, then the prompt and the tools change and the session reloads, then turn 2."""
    model = ScriptedModel([text("one"), text("two")])
    host = runtime_host(load_agent(path, env={}), RuntimeSettings(home=home), model=model)
    async with await Session.open(host) as session:
        await session.run(["first"])
        write(path.parent, system="You add and multiply.", tools=MORE_TOOLS)
        await session.reload(load_agent(path, env={}))
        await session.run(["second"])
        sid = session.session_id
    await host.aclose()
    return sid


def events(home: Path, sid: str, name: str) -> list[dict[str, Any]]:
    lines = (home / "sessions" / f"{sid}.jsonl").read_text(encoding="utf-8").splitlines()
    return [r["data"] for r in map(json.loads, lines) if r.get("event") == name]


async def test_each_turn_records_the_configuration_it_ran_under(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sid = await two_turns_with_a_reload_between(write(tmp_path / "a"), home)
    turns = events(home, sid, "turn")
    configs = events(home, sid, "config")
    assert [t["turn"] for t in turns] == [1, 2]
    assert turns[0]["config"] != turns[1]["config"]  # the reload changed the files the agent is made of
    assert [c["hash"] for c in configs] == [t["config"] for t in turns]
    assert sorted(configs[1]["snapshot"]["tools"]) == ["add", "mul"]


async def test_sessions_show_prints_each_turns_configuration_and_what_changed(
    tmp_path: Path, cli: Cli
) -> None:
    sid = await two_turns_with_a_reload_between(write(tmp_path / "a"), cli.home)
    shown = cli("sessions", "show", sid)
    assert shown.returncode == 0, shown.stderr
    first, second = (t["config"] for t in events(cli.home, sid, "turn"))
    out = shown.stdout
    assert f"(turn 1, configuration {first})" in out and f"(turn 2, configuration {second})" in out
    assert f"(configuration changed: {first} -> {second})" in out
    assert "tools:" in out and "  + mul" in out
    assert "-You add.\n" in out + "\n" and "+You add and multiply." in out  # the prompt's unified diff
    assert out.index("configuration changed") < out.index("(turn 2,")


def git(folder: Path, *args: str) -> str:
    command = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def test_sessions_list_filters_by_agent_and_by_revision(
    tmp_path: Path, cli: Cli, scripted_server: Any
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    server = scripted_server([{"content": "ok"}], repeat=True)
    model = f"{{id: openai/scripted, api_base: '{server.base_url}', api_key: '${{K:-sk-t}}'}}"
    calc = write(repo / "calc")
    calc.write_text(calc.read_text().replace("openai/scripted", model))
    other = write(repo / "other", name="other")
    other.write_text(other.read_text().replace("openai/scripted", model))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one")
    old = git(repo, "rev-parse", "HEAD")
    assert cli("run", str(calc), "-p", "at the first commit").returncode == 0
    assert cli("run", str(other), "-p", "the other agent").returncode == 0
    calc.write_text(calc.read_text().replace("You add.", "You add, carefully."))
    git(repo, "commit", "-q", "-am", "two")
    assert cli("run", str(calc), "-p", "at the second commit").returncode == 0

    def listed(*args: str) -> list[str]:
        result = cli("sessions", "list", *args)
        assert result.returncode == 0, result.stderr
        return [line.split("msgs")[-1].strip() for line in result.stdout.splitlines()]

    assert sorted(listed("--agent", "calc")) == ["at the first commit", "at the second commit"]
    assert listed("--agent", "calc", "--rev", "HEAD~1") == ["at the first commit"]
    assert sorted(listed("--rev", old[:10])) == ["at the first commit", "the other agent"]
    assert listed("--rev", "HEAD") == ["at the second commit"]
    missing = cli("sessions", "list", "--rev", "no-such-branch")
    assert missing.returncode == 2 and "no revision 'no-such-branch'" in missing.stderr
    nobody = cli("sessions", "list", "--agent", "nobody")
    assert nobody.returncode == 0 and nobody.stdout == "" and "no sessions of agent nobody" in nobody.stderr
