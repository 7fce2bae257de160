"""Which YAML files of a folder are agents: scripts and ``extends`` fragments are set aside."""

from __future__ import annotations

from pathlib import Path

from runner.agentfile.discover import NO_VERSION, ONLY_EXTENDED, discover, search_folder, skipped_note

SCRIPT = "# a scripted model's replies\nscript:\n  - content: hello\n"
FRAGMENT = "version: 1\nmodel: openai/gpt-4o-mini\nlimits:\n  max_steps: 3\n"


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_script_and_a_fragment_are_skipped_and_agents_kept(tmp_path: Path) -> None:
    script = _write(tmp_path, "scripts/weather.yaml", SCRIPT)
    base = _write(tmp_path, "shared/base.yaml", FRAGMENT)
    agent = _write(tmp_path, "weather.yaml", "version: 1\nname: weather\nextends: shared/base.yaml\n")
    member = _write(
        tmp_path, "team.yaml", "version: 1\nagents:\n  a:\n    extends: ./shared/../shared/base.yaml\n"
    )
    found = discover(search_folder(tmp_path), env={})
    assert found.skipped == {script: NO_VERSION, base: ONLY_EXTENDED}
    assert found.agents == [member, agent]


def test_a_fragment_that_nothing_found_extends_is_an_agent_to_check(tmp_path: Path) -> None:
    base = _write(tmp_path, "base.yaml", FRAGMENT)
    assert discover([base], env={}).agents == [base]  # reported: it has no name


def test_an_extended_file_with_a_name_is_an_agent_of_its_own(tmp_path: Path) -> None:
    base = _write(tmp_path, "base.yaml", "version: 1\nname: base\n")
    child = _write(tmp_path, "child.yaml", "version: 1\nname: child\nextends: base.yaml\n")
    assert discover([base, child], env={}).agents == [base, child]


def test_an_agent_that_forgot_its_version_is_still_checked(tmp_path: Path) -> None:
    forgot = _write(tmp_path, "forgot.yaml", "name: weather\nmodel: openai/gpt-4o-mini\n")
    team = _write(tmp_path, "team.yaml", "agents:\n  a: {}\n")
    assert discover([forgot, team], env={}).agents == [forgot, team]


def test_a_file_that_cannot_be_read_as_yaml_is_kept_so_its_error_is_reported(tmp_path: Path) -> None:
    broken = _write(tmp_path, "broken.yaml", "version: 1\nname: [unclosed\n")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\x00\x01")
    assert discover([broken, binary], env={}).agents == [broken, binary]


def test_extends_paths_written_with_variables_are_followed(tmp_path: Path) -> None:
    base = _write(tmp_path, "shared/base.yaml", FRAGMENT)
    child = _write(tmp_path, "child.yaml", "version: 1\nname: c\nextends: ${H13_DIR:-shared}/base.yaml\n")
    assert discover([base, child], env={}).skipped == {base: ONLY_EXTENDED}
    assert discover([base, child], env={"H13_DIR": "elsewhere"}).agents == [base, child]


def test_the_note_is_one_line_grouped_by_reason(tmp_path: Path) -> None:
    skipped = {Path("s/a.yaml"): NO_VERSION, Path("s/b.yaml"): NO_VERSION, Path("base.yaml"): ONLY_EXTENDED}
    assert skipped_note(skipped) == (
        "skipped 3 files that are not agents: s/a.yaml, s/b.yaml (no version:); "
        "base.yaml (only extended by other files)"
    )
    assert (
        skipped_note({Path("a.yaml"): NO_VERSION})
        == "skipped 1 file that is not an agent: a.yaml (no version:)"
    )
    assert skipped_note({}) is None
