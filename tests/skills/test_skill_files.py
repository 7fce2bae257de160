"""`runner validate` on skill folders: every SKILL.md checked, each problem at its file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.agentfile import load_agent
from runner.agentfile.skills import MAX_SKILL_BYTES
from runner.errors import ConfigErrors
from tests.skills.conftest import Invoke, write_agent, write_skill


def _problems(cli: Invoke, agent: Path) -> list[dict[str, object]]:
    """The errors ``runner validate --json`` reports, with absolute file names (it shows them relative)."""
    result = cli("validate", str(agent), "--json")
    assert result.exit_code == 2, result.output
    errors = [e for report in json.loads(result.stdout) for e in report["errors"]]
    return [{**e, "file": str(agent.parent / str(e["file"]))} for e in errors]


def test_a_valid_skill_with_every_key_loads_into_the_config(tmp_path: Path, cli: Invoke) -> None:
    skill = write_skill(
        tmp_path / "skills",
        "pdf-tools",
        extra="license: Apache-2.0\ncompatibility: needs python3\nmetadata:\n  author: me\n"
        '  version: "1.0"\nallowed-tools: Bash(python3:*) Read\n',
    )
    (skill / "scripts").mkdir()
    (skill / "scripts" / "fill.py").write_text("print('x')\n")
    (skill / "references").mkdir()
    (skill / "references" / "forms.md").write_text("forms\n")
    (skill / "FORMS.md").write_text("top-level reference\n")
    (skill / ".git").mkdir()
    (skill / ".git" / "HEAD").write_text("ref: x\n")
    agent = write_agent(tmp_path)
    result = cli("validate", str(agent))
    assert result.exit_code == 0, result.output
    (found,) = load_agent(agent).skills
    assert (found.name, found.license, found.compatibility) == ("pdf-tools", "Apache-2.0", "needs python3")
    assert found.metadata == {"author": "me", "version": "1.0"}
    assert found.allowed_tools == ("Bash(python3:*)", "Read")
    assert found.files == ("FORMS.md", "references/forms.md", "scripts/fill.py")
    assert found.scripts == ("scripts/fill.py",)


@pytest.mark.parametrize(
    ("front", "line", "words"),
    [
        ("name: Hello\ndescription: d\n", 2, "is not a skill name"),
        ("name: -hello\ndescription: d\n", 2, "is not a skill name"),
        ("name: hel--lo\ndescription: d\n", 2, "is not a skill name"),
        ("name: hello-\ndescription: d\n", 2, "is not a skill name"),
        ("description: d\nname: other\n", 3, "does not match its folder 'hello'"),
        ("name: hello\ndescription: d\nversion: 2\n", 4, "unknown frontmatter key 'version'"),
        ("name: hello\n", 2, "has no description"),
        ("name: hello\ndescription: ''\n", 3, "description is empty"),
        (f"name: hello\ndescription: {'d' * 1025}\n", 3, "description is 1025 characters, more than 1024"),
        (f"name: hello\ndescription: d\ncompatibility: {'c' * 501}\n", 4, "more than 500"),
        ("name: hello\ndescription: d\nmetadata:\n  version: 1.0\n", 4, "metadata must map strings"),
        ("name: hello\ndescription: [a, b]\n", 3, "description must be a string"),
        ("name: hello\ndescription: d\nx: &a [1]\ny: *a\n", 4, "may not use YAML aliases"),
        ("name: hello\ndescription: d: e\n", 3, "not valid YAML"),
        ("- a list\n", 2, "must be a mapping"),
    ],
)
def test_a_broken_frontmatter_is_an_error_at_its_line(
    tmp_path: Path, cli: Invoke, front: str, line: int, words: str
) -> None:
    write_skill(tmp_path / "skills", "hello", front=front)
    agent = write_agent(tmp_path)
    (problem,) = _problems(cli, agent)
    assert problem["file"] == str(tmp_path / "skills" / "hello" / "SKILL.md")
    assert problem["line"] == line, problem
    assert words in str(problem["message"]), problem


def test_a_name_longer_than_64_characters_is_refused(tmp_path: Path, cli: Invoke) -> None:
    name = "a" * 65
    write_skill(tmp_path / "skills", name)
    (problem,) = _problems(cli, write_agent(tmp_path))
    assert problem["message"] == "name is 65 characters, more than 64" and problem["line"] == 2
    write_skill(tmp_path / "ok", "a" * 64)
    assert cli("validate", str(write_agent(tmp_path / "ok", "skills: [.]\n"))).exit_code == 0


def test_a_skill_md_without_frontmatter_says_so_on_line_1(tmp_path: Path, cli: Invoke) -> None:
    folder = tmp_path / "skills" / "plain"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("# Just markdown\n\nNo frontmatter here.\n")
    result = cli("validate", str(write_agent(tmp_path)))
    assert result.exit_code == 2
    assert (
        "skills/plain/SKILL.md:1:1: SKILL.md has no frontmatter: its first line must be ---" in result.stderr
    )


def test_an_unclosed_frontmatter_is_an_error(tmp_path: Path, cli: Invoke) -> None:
    folder = tmp_path / "skills" / "open"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: open\ndescription: d\n# body\n")
    (problem,) = _problems(cli, write_agent(tmp_path))
    assert "not closed" in str(problem["message"])


def test_ten_megabytes_of_body_is_refused_without_reading_it(tmp_path: Path, cli: Invoke) -> None:
    skill = write_skill(tmp_path / "skills", "huge")
    with (skill / "SKILL.md").open("a") as handle:
        handle.write("x" * (10 * 1024 * 1024))
    (problem,) = _problems(cli, write_agent(tmp_path))
    assert f"more than the {MAX_SKILL_BYTES:,} a skill may have" in str(problem["message"])
    assert "references/" in str(problem["hint"])


def test_two_skills_with_one_name_name_both_files(tmp_path: Path, cli: Invoke) -> None:
    first = write_skill(tmp_path / ".agents" / "skills", "hello")
    second = write_skill(tmp_path / "skills", "hello")
    (problem,) = _problems(cli, write_agent(tmp_path))
    assert problem["file"] == str(second / "SKILL.md") and problem["line"] == 2
    assert f"a second skill named 'hello' (the first is {first / 'SKILL.md'})" == problem["message"]
    assert problem["hint"] == "skill names are unique per agent: rename one or list fewer folders"


def test_every_broken_skill_is_reported_in_one_pass(tmp_path: Path, cli: Invoke) -> None:
    write_skill(tmp_path / "skills", "one", front="name: One\ndescription: d\n")
    write_skill(tmp_path / "skills", "two", front="name: two\ndescription: d\nfoo: 1\n")
    write_skill(tmp_path / "skills", "three")
    problems = _problems(cli, write_agent(tmp_path))
    assert sorted(Path(str(p["file"])).parent.name for p in problems) == ["one", "two"]


def test_a_listed_folder_that_is_missing_points_at_the_agent_file(tmp_path: Path, cli: Invoke) -> None:
    agent = write_agent(tmp_path, "skills:\n  - my-skills\n")
    (problem,) = _problems(cli, agent)
    assert problem["file"] == str(agent) and problem["line"] == 5
    assert "skills folder" in str(problem["message"]) and "my-skills" in str(problem["message"])


def test_skills_true_without_any_folder_is_fine_and_adds_nothing(tmp_path: Path, cli: Invoke) -> None:
    agent = write_agent(tmp_path)
    assert cli("validate", str(agent)).exit_code == 0
    config = load_agent(agent)
    assert config.skills == () and config.tools == ()


def test_a_listed_folder_may_be_one_skill_and_conventional_folders_all_count(tmp_path: Path) -> None:
    write_skill(tmp_path / ".agents" / "skills", "alpha")
    write_skill(tmp_path / ".claude" / "skills", "beta")
    write_skill(tmp_path / "skills", "gamma")
    write_skill(tmp_path / "elsewhere", "delta")
    assert [s.name for s in load_agent(write_agent(tmp_path)).skills] == ["alpha", "beta", "gamma"]
    listed = load_agent(write_agent(tmp_path, "skills: [elsewhere/delta, skills]\n"))
    assert [s.name for s in listed.skills] == ["delta", "gamma"]


def test_skills_false_and_a_wrong_type_are_schema_matters(tmp_path: Path, cli: Invoke) -> None:
    write_skill(tmp_path / "skills", "hello")
    assert load_agent(write_agent(tmp_path, "skills: false\n")).skills == ()
    (problem,) = _problems(cli, write_agent(tmp_path, "skills: skills\n"))
    assert problem["path"] == "skills" and problem["line"] == 4


def test_run_refuses_a_broken_skill_like_validate(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "hello", front="name: hello\n")
    with pytest.raises(ConfigErrors) as caught:
        load_agent(write_agent(tmp_path))
    assert "has no description" in caught.value.message


def test_a_team_agent_and_an_extends_base_find_skills_from_their_own_file(
    tmp_path: Path, cli: Invoke
) -> None:
    write_skill(tmp_path / "base" / "skills", "from-base")
    (tmp_path / "base" / "base.yaml").write_text(
        "version: 1\nname: base\nmodel: openai/scripted\nskills: true\n"
    )
    child = tmp_path / "child.yaml"
    child.write_text("version: 1\nname: child\nextends: base/base.yaml\n")
    assert [s.name for s in load_agent(child).skills] == ["from-base"]

    write_skill(tmp_path / "team-skills", "writer", front="name: writer\n")  # no description
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: team\nagents:\n  plain:\n    model: openai/scripted\n"
        "  writer:\n    model: openai/scripted\n    skills: [team-skills]\n"
    )
    (problem,) = _problems(cli, team)
    assert problem["file"] == str(tmp_path / "team-skills" / "writer" / "SKILL.md")
    write_skill(tmp_path / "team-skills", "writer")
    assert [s.name for s in load_agent(team, agent="writer").skills] == ["writer"]
    assert load_agent(team, agent="plain").skills == ()
