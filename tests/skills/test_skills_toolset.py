"""The ``skills`` toolset in process: a body loaded on demand, files read only inside their skill's folder."""

from __future__ import annotations

import json
import os
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from runner.agentfile import load_agent
from runner.errors import ToolError
from runner.runtime import RuntimeSettings, build_runtime
from runner.session.context import estimate_tokens
from runner.testing import ScriptedModel
from runner.tools.base import RunContext, Tool
from runner.tools.builtin import load_source
from runner.tools.sources import SourceContext
from tests.skills.conftest import write_agent, write_skill

CTX = RunContext(session_id="s1", agent="skilled")


async def _tools(tmp_path: Path) -> dict[str, Tool]:
    config = load_agent(tmp_path / "agent.yaml")
    (source,) = config.tools
    async with AsyncExitStack() as stack:
        loaded = await load_source(source, SourceContext(agent=config), stack)
    return {t.name: t for t in loaded.tools}


@pytest.fixture
def skilled(tmp_path: Path) -> Path:
    """Two skills (one with a script and a reference) and a secret file beside them."""
    hello = write_skill(tmp_path / "skills", "hello")
    (hello / "scripts").mkdir()
    (hello / "scripts" / "hi.sh").write_text("echo hi\n")
    (hello / "references").mkdir()
    (hello / "references" / "style.md").write_text("Be brief.\n")
    write_skill(tmp_path / "skills", "other", description="Another skill.", body="Other body.\n")
    (tmp_path / "secret.txt").write_text("TOP SECRET\n")
    write_agent(tmp_path)
    return tmp_path


async def test_load_gives_the_body_and_the_files_of_the_skill(skilled: Path) -> None:
    tools = await _tools(skilled)
    assert sorted(tools) == ["skills_load", "skills_read"]
    text = await tools["skills_load"].call({"name": "hello"}, CTX)
    assert text.startswith("# Skill: hello\nFolder: ") and str(skilled / "skills" / "hello") in text
    assert "- scripts/hi.sh" in text and "- references/style.md" in text
    assert text.endswith("# Hello\n\nRun scripts/hi.sh and repeat what it prints.")
    assert "---" not in text and "description: Says hello" not in text  # the frontmatter stays out


async def test_the_body_is_read_when_asked_so_an_edit_shows_at_once(skilled: Path) -> None:
    tools = await _tools(skilled)
    write_skill(skilled / "skills", "hello", body="Edited body.\n")
    assert (await tools["skills_load"].call({"name": "hello"}, CTX)).endswith("Edited body.")


async def test_read_returns_a_file_of_the_skill(skilled: Path) -> None:
    tools = await _tools(skilled)
    read = tools["skills_read"]
    assert await read.call({"name": "hello", "path": "references/style.md"}, CTX) == "Be brief.\n"
    assert await read.call({"name": "hello", "path": "scripts/hi.sh"}, CTX) == "echo hi\n"


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("../other/SKILL.md", "is not a path inside the skill 'hello'"),
        ("../../secret.txt", "is not a path inside the skill 'hello'"),
        ("scripts/../../../secret.txt", "is not a path inside the skill 'hello'"),
        ("/etc/passwd", "is not a path inside the skill 'hello'"),
        ("references/missing.md", "has no file 'references/missing.md'"),
    ],
)
async def test_a_path_out_of_the_skill_folder_is_refused(skilled: Path, path: str, words: str) -> None:
    tools = await _tools(skilled)
    with pytest.raises(ToolError) as caught:
        await tools["skills_read"].call({"name": "hello", "path": path}, CTX)
    assert words in caught.value.message
    assert "TOP SECRET" not in caught.value.message


async def test_a_symlink_that_leads_out_is_refused(skilled: Path) -> None:
    os.symlink(skilled / "secret.txt", skilled / "skills" / "hello" / "references" / "link.md")
    tools = await _tools(skilled)
    with pytest.raises(ToolError) as caught:
        await tools["skills_read"].call({"name": "hello", "path": "references/link.md"}, CTX)
    assert "leads out of the skill 'hello'" in caught.value.message


async def test_an_unknown_skill_and_a_binary_file_are_tool_errors(skilled: Path) -> None:
    (skilled / "skills" / "hello" / "references" / "logo.png").write_bytes(b"\x89PNG\0\0\0")
    tools = await _tools(skilled)
    with pytest.raises(ToolError) as caught:
        await tools["skills_load"].call({"name": "nope"}, CTX)
    assert caught.value.message == "no skill named 'nope'; the skills are: hello, other"
    with pytest.raises(ToolError) as binary:
        await tools["skills_read"].call({"name": "hello", "path": "references/logo.png"}, CTX)
    assert "binary" in binary.value.message


async def test_the_system_prompt_lists_names_and_descriptions_not_bodies(
    skilled: Path, tmp_path: Path
) -> None:
    config = load_agent(skilled / "agent.yaml")
    runtime = await build_runtime(config, RuntimeSettings(home=skilled / "home"), model=ScriptedModel([]))
    try:
        system = runtime.prompts.system("hi", {})
        assert system is not None
        text = system["content"]
        assert text.startswith("## Skills\n")
        assert "- hello: Says hello. Use when the user wants a greeting." in text
        assert "- other: Another skill." in text
        assert "Run scripts/hi.sh" not in text and "Other body" not in text
    finally:
        await runtime.aclose()


async def test_each_skill_costs_the_first_request_at_most_about_100_tokens(tmp_path: Path) -> None:
    """The largest skills the specification allows (64-character names, 1,024-character descriptions)."""

    async def first_request_chars(count: int) -> int:
        folder = tmp_path / f"n{count}"
        for i in range(count):
            name = f"s{i:02d}-" + "x" * 60
            write_skill(folder / "skills", name, description=("Use it for the task it covers. " * 40)[:1024])
        runtime = await build_runtime(
            load_agent(write_agent(folder)), RuntimeSettings(home=tmp_path / "home"), model=ScriptedModel([])
        )
        try:
            system = runtime.prompts.system("hi", {})
            return len(system["content"] if system else "") + len(json.dumps(runtime.registry.definitions()))
        finally:
            await runtime.aclose()

    one, eleven = await first_request_chars(1), await first_request_chars(11)
    assert estimate_tokens(eleven - one) / 10 <= 100
    assert estimate_tokens(one) < 400  # the section's header and the two tools, paid once
