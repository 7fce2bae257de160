"""The ``files`` toolset: read, write, list and search inside ``root``, and nothing outside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.errors import ToolError
from runner.tools.base import RunContext, Tool


@pytest.fixture
async def files(load_builtin: Any, tmp_path: Path) -> dict[str, Tool]:
    """The file tools with root ``tmp_path/ws``."""
    tools: dict[str, Tool] = await load_builtin("files", {"root": "ws"})
    return tools


async def test_root_is_created_relative_to_the_agent_file(load_builtin: Any, tmp_path: Path) -> None:
    agent_dir = tmp_path / "agents"
    agent_dir.mkdir()
    tools = await load_builtin("files", {"root": "./work/area"}, base_dir=agent_dir)
    assert (agent_dir / "work" / "area").is_dir()
    assert sorted(tools) == ["files_list", "files_read", "files_search", "files_write"]


async def test_write_creates_parents_and_read_returns_the_text(
    files: dict[str, Tool], run_ctx: RunContext, tmp_path: Path
) -> None:
    message = await files["files_write"].call({"path": "notes/today.md", "content": "one\ntwo\n"}, run_ctx)
    assert message.startswith("Created notes/today.md")
    assert (tmp_path / "ws" / "notes" / "today.md").read_text() == "one\ntwo\n"
    assert await files["files_read"].call({"path": "notes/today.md"}, run_ctx) == "one\ntwo\n"
    await files["files_write"].call({"path": "notes/today.md", "content": "three\n", "append": True}, run_ctx)
    assert (tmp_path / "ws" / "notes" / "today.md").read_text() == "one\ntwo\nthree\n"


async def test_read_a_line_range(files: dict[str, Tool], run_ctx: RunContext, tmp_path: Path) -> None:
    (tmp_path / "ws" / "log.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    text = await files["files_read"].call({"path": "log.txt", "start_line": 3, "end_line": 4}, run_ctx)
    assert text == "line 3\nline 4\n\n[lines 3-4 of 10]"
    with pytest.raises(ToolError, match="has only 10 lines"):
        await files["files_read"].call({"path": "log.txt", "start_line": 11}, run_ctx)


async def test_read_is_cut_at_max_read_chars_with_a_note(
    load_builtin: Any, run_ctx: RunContext, tmp_path: Path
) -> None:
    tools = await load_builtin("files", {"root": "ws", "max_read_chars": 20})
    (tmp_path / "ws" / "long.txt").write_text("".join(f"row{n:02d}\n" for n in range(50)))
    text = await tools["files_read"].call({"path": "long.txt"}, run_ctx)
    assert text.startswith("row00\nrow01\nrow02\n\n[cut at 20 characters")
    assert "start_line=4" in text


async def test_reading_a_binary_file_is_refused(
    files: dict[str, Tool], run_ctx: RunContext, tmp_path: Path
) -> None:
    (tmp_path / "ws" / "image.bin").write_bytes(b"\x89PNG\0\0\0data")
    with pytest.raises(ToolError, match="binary file"):
        await files["files_read"].call({"path": "image.bin"}, run_ctx)


async def test_list_shows_entries_to_the_given_depth_and_filters_by_glob(
    files: dict[str, Tool], run_ctx: RunContext, tmp_path: Path
) -> None:
    root = tmp_path / "ws"
    (root / "src" / "pkg" / "deep").mkdir(parents=True)
    (root / "src" / "main.py").write_text("print(1)\n")
    (root / "src" / "pkg" / "deep" / "hidden.py").write_text("")
    (root / "README.md").write_text("# hi\n")
    listing = await files["files_list"].call({"depth": 2}, run_ctx)
    lines = listing.splitlines()
    assert "README.md (5 B)" in lines
    assert "src/" in lines and "src/main.py (9 B)" in lines and "src/pkg/" in lines
    assert not any("hidden.py" in line for line in lines)
    only_python = await files["files_list"].call({"path": "src", "pattern": "*.py", "depth": 5}, run_ctx)
    assert only_python.splitlines()[1:] == ["main.py (9 B)", "pkg/deep/hidden.py (0 B)"]


async def test_search_finds_substrings_and_regexes_with_line_numbers(
    files: dict[str, Tool], run_ctx: RunContext, tmp_path: Path
) -> None:
    root = tmp_path / "ws"
    (root / "a.py").write_text("import os\nTODO: fix me\n")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("nothing\ntodo later\n")
    found = await files["files_search"].call({"query": "todo"}, run_ctx)
    assert found.splitlines() == ["a.py:2: TODO: fix me", "sub/b.txt:2: todo later"]
    regex = await files["files_search"].call({"query": r"^import \w+$", "regex": True}, run_ctx)
    assert regex == "a.py:1: import os"
    none = await files["files_search"].call({"query": "todo", "pattern": "*.md"}, run_ctx)
    assert none.startswith("No matches")
    with pytest.raises(ToolError, match="Invalid regular expression"):
        await files["files_search"].call({"query": "(", "regex": True}, run_ctx)


async def test_search_results_are_capped_with_a_note(
    load_builtin: Any, run_ctx: RunContext, tmp_path: Path
) -> None:
    tools = await load_builtin("files", {"root": "ws", "max_results": 3})
    (tmp_path / "ws" / "many.txt").write_text("hit\n" * 10)
    found = await tools["files_search"].call({"query": "hit"}, run_ctx)
    assert found.splitlines()[:3] == ["many.txt:1: hit", "many.txt:2: hit", "many.txt:3: hit"]
    assert found.splitlines()[3] == "[7 more matches not shown; narrow with path, pattern or a longer query]"


@pytest.mark.parametrize("path", ["../../etc/passwd", "../outside.txt", "sub/../../x", "ABSOLUTE"])
async def test_paths_outside_the_root_are_refused(
    files: dict[str, Tool], run_ctx: RunContext, tmp_path: Path, path: str
) -> None:
    if path == "ABSOLUTE":  # an absolute path outside the root (in the test's own folder: safe to hit)
        path = str(tmp_path / "outside.txt")
    for tool, arguments in [
        ("files_read", {"path": path}),
        ("files_write", {"path": path, "content": "x"}),
        ("files_list", {"path": path}),
        ("files_search", {"query": "root", "path": path}),
    ]:
        with pytest.raises(ToolError, match="is outside the root"):
            await files[tool].call(arguments, run_ctx)
    assert not (tmp_path / "outside.txt").exists()


async def test_system_files_are_refused_by_absolute_path(files: dict[str, Tool], run_ctx: RunContext) -> None:
    with pytest.raises(ToolError, match="'/etc/passwd' is outside the root"):
        await files["files_read"].call({"path": "/etc/passwd"}, run_ctx)
    with pytest.raises(ToolError, match="'/etc' is outside the root"):
        await files["files_list"].call({"path": "/etc"}, run_ctx)


async def test_a_refused_write_creates_nothing_outside(
    files: dict[str, Tool], run_ctx: RunContext, tmp_path: Path
) -> None:
    with pytest.raises(ToolError, match="outside the root"):
        await files["files_write"].call({"path": "../escaped/file.txt", "content": "x"}, run_ctx)
    assert not (tmp_path / "escaped").exists()


async def test_a_symlink_pointing_out_of_the_root_is_refused(
    files: dict[str, Tool], run_ctx: RunContext, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("password=hunter2\n")
    (tmp_path / "ws" / "link.txt").symlink_to(secret)
    (tmp_path / "ws" / "linkdir").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(ToolError, match="outside the root"):
        await files["files_read"].call({"path": "link.txt"}, run_ctx)
    with pytest.raises(ToolError, match="outside the root"):
        await files["files_write"].call({"path": "link.txt", "content": "overwritten"}, run_ctx)
    with pytest.raises(ToolError, match="outside the root"):
        await files["files_read"].call({"path": "linkdir/secret.txt"}, run_ctx)
    (tmp_path / "ws" / "dangling").symlink_to(tmp_path / "not_yet")
    with pytest.raises(ToolError, match="outside the root"):
        await files["files_write"].call({"path": "dangling/new.txt", "content": "x"}, run_ctx)
    assert not (tmp_path / "not_yet").exists()
    assert secret.read_text() == "password=hunter2\n"
    assert (await files["files_search"].call({"query": "hunter2"}, run_ctx)).startswith("No matches")


async def test_an_absolute_path_inside_the_root_is_accepted(
    files: dict[str, Tool], run_ctx: RunContext, tmp_path: Path
) -> None:
    (tmp_path / "ws" / "in.txt").write_text("inside\n")
    assert await files["files_read"].call({"path": str(tmp_path / "ws" / "in.txt")}, run_ctx) == "inside\n"


async def test_allow_write_false_leaves_out_the_write_tool(load_builtin: Any) -> None:
    tools = await load_builtin("files", {"root": "ws", "allow_write": False})
    assert sorted(tools) == ["files_list", "files_read", "files_search"]
