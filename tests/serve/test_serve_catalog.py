"""``runner serve DIR``'s catalog: YAML that is not an agent is set aside without a warning."""

from __future__ import annotations

from pathlib import Path

from runner.serve.catalog import load_catalog

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_repository_examples_are_served_without_warnings() -> None:
    catalog = load_catalog([EXAMPLES], env={})
    assert catalog.problems() == []
    assert {"weather", "calculator", "lead", "meteorologist", "calc"} <= set(catalog.agents)
    skipped = {p.relative_to(EXAMPLES).as_posix(): why for p, why in catalog.not_agents.items()}
    assert skipped["scripts/weather.yaml"] == "no version:"
    assert skipped["shared/base.yaml"] == "only extended by other files"
    note = catalog.note()
    assert note is not None and note.startswith("skipped 6 files that are not agents: ")


def test_a_broken_agent_is_still_warned_about_and_a_script_is_not(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "s.yaml").write_text("script:\n  - content: hi\n", encoding="utf-8")
    (tmp_path / "base.yaml").write_text("version: 1\nlimits:\n  max_steps: 2\n", encoding="utf-8")
    (tmp_path / "ok.yaml").write_text("version: 1\nname: ok\nextends: base.yaml\n", encoding="utf-8")
    (tmp_path / "bad.yaml").write_text("version: 1\nname: bad\nfunction_calling: nativ\n", encoding="utf-8")
    catalog = load_catalog([tmp_path], env={})
    assert set(catalog.agents) == {"ok"}
    assert catalog.agents["ok"].config.limits.max_steps == 2
    (problem,) = catalog.problems()
    assert problem.startswith(f"skipped {tmp_path / 'bad.yaml'}:3:19: function_calling:")
    assert set(catalog.not_agents) == {
        (tmp_path / "scripts" / "s.yaml").resolve(),
        (tmp_path / "base.yaml").resolve(),
    }


def test_a_non_agent_file_given_by_name_is_still_a_failure(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("script:\n  - content: hi\n", encoding="utf-8")
    catalog = load_catalog([script], env={})
    assert catalog.agents == {} and catalog.not_agents == {}
    (problem,) = catalog.problems()
    assert "missing required key 'version'" in problem
