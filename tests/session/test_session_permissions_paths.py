"""Path rules see the path the ``files`` tools will use (issue 23, item 7).

``files_read(path=secrets/*)`` must stop every spelling of ``secrets/key.txt`` the tool accepts:
surrounding spaces or tabs (the tool strips them), an absolute path into the root, ``/proc/self/cwd``,
a symlink inside the root leading to the secret. Each attack is a scripted model's call.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.testing import text, tool_call

DENIED = "Denied by the permissions rule 'files_read(path=secrets/*)'."
BODY = """
tools:
  - builtin: files
    with: {root: ws}
permissions:
  deny: ["files_read(path=secrets/*)"]
"""
CONFIRMED = """
tools:
  - builtin: files
    with: {root: ws}
    confirm: true
permissions:
  allow: ["files_write(path=notes/*)"]
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    (folder / "secrets").mkdir(parents=True)
    (folder / "secrets" / "key.txt").write_text("sk-the-secret\n")
    (folder / "notes").mkdir()
    (folder / "notes" / "todo.md").write_text("buy milk\n")
    return folder


async def _read(agent, drive, path: str) -> str:
    run = await drive(agent(BODY), [tool_call("files_read", path=path), text("ok")], "read it")
    (result,) = run.tool_results()
    content: str = result["content"]
    return content


@pytest.mark.parametrize(
    "spelling",
    [
        " secrets/key.txt",
        "secrets/key.txt ",
        "\tsecrets/key.txt\t",
        " ./secrets//key.txt",
        "notes/../secrets/key.txt",
    ],
)
async def test_spaces_and_tabs_around_a_path_do_not_pass_a_deny_rule(agent, drive, root, spelling):
    assert await _read(agent, drive, spelling) == DENIED


async def test_an_absolute_path_into_the_root_does_not_pass_a_deny_rule(agent, drive, root):
    assert await _read(agent, drive, str(root / "secrets" / "key.txt")) == DENIED
    assert await _read(agent, drive, f" {root}/notes/../secrets/key.txt") == DENIED


async def test_proc_self_cwd_into_the_root_does_not_pass_a_deny_rule(agent, drive, root, monkeypatch):
    monkeypatch.chdir(root)
    assert await _read(agent, drive, "/proc/self/cwd/secrets/key.txt") == DENIED


async def test_a_symlink_to_the_secret_does_not_pass_a_deny_rule(agent, drive, root):
    (root / "notes" / "link.txt").symlink_to(root / "secrets" / "key.txt")
    (root / "keys").symlink_to("secrets")
    assert await _read(agent, drive, "notes/link.txt") == DENIED
    assert await _read(agent, drive, "keys/key.txt") == DENIED


async def test_other_paths_are_still_read(agent, drive, root):
    assert await _read(agent, drive, " notes/todo.md") == "buy milk\n"
    assert await _read(agent, drive, str(root / "notes" / "todo.md")) == "buy milk\n"


async def test_an_allow_rule_vouches_only_for_the_path_the_tool_will_write(agent, drive, root):
    """A confirmed toolset: ``files_write`` is asked for (refused without a user) unless it lands in
    ``notes/``, which ``notes/out/key.txt`` does not when ``notes/out`` leads to ``secrets/``."""
    (root / "notes" / "out").symlink_to(root / "secrets")
    script = [
        tool_call("files_write", path="notes/new.md", content="x"),
        tool_call("files_write", path="notes/out/key.txt", content="overwritten"),
        text("ok"),
    ]
    run = await drive(agent(CONFIRMED), script, "write")
    allowed, asked = (m["content"] for m in run.tool_results())
    assert allowed.startswith("Created notes/new.md")
    assert asked.startswith("Refused: files_write needs the user's confirmation")
    assert (root / "secrets" / "key.txt").read_text() == "sk-the-secret\n"


async def test_a_trailing_space_or_tab_does_not_pass_an_exact_deny_rule(agent, drive, root):
    (root / ".env").write_text("KEY=sk-the-secret\n")
    body = BODY.replace("files_read(path=secrets/*)", "files_read(path=.env)")
    for spelling in (".env ", ".env\t", " .env", "./.env "):
        run = await drive(agent(body), [tool_call("files_read", path=spelling), text("ok")], "read it")
        (result,) = run.tool_results()
        assert result["content"] == "Denied by the permissions rule 'files_read(path=.env)'.", spelling
