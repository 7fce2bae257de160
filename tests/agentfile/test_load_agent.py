"""The typed ``AgentConfig`` built from the valid fixture files (``tests/fixtures/good/``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.agentfile import check_file, load_agent, load_file
from runner.agentfile.loader import explain
from runner.errors import ConfigError, ConfigErrors

GOOD = Path(__file__).resolve().parent.parent / "fixtures" / "good"
GOOD_FILES = sorted(GOOD.rglob("*.yaml"))


@pytest.mark.parametrize("path", GOOD_FILES, ids=[str(p.relative_to(GOOD)) for p in GOOD_FILES])
def test_good_fixture_has_no_errors(path: Path) -> None:
    assert check_file(path, env={}) == []


# --- extends ----------------------------------------------------------------------------------------


def test_extends_chain_deep_merges_mappings_and_the_child_wins() -> None:
    spec = load_agent(GOOD / "weather.yaml", env={})
    assert spec.name == "weather"
    assert spec.description == "Answers weather questions briefly."  # middle over base
    assert spec.model is not None
    assert spec.model.id == "openai/gpt-4o-mini"  # base
    assert spec.model.temperature == 0.5  # middle
    assert spec.model.retries == 1  # base
    assert spec.limits.max_steps == 8  # base
    assert spec.limits.max_turns == 5  # middle
    assert spec.vars == {"units": "imperial", "city": "Vancouver"}  # child merged into base
    assert spec.permissions.ask == ("weather",)  # child only


def test_relative_paths_of_a_base_resolve_against_the_base_folder() -> None:
    spec = load_agent(GOOD / "weather.yaml", env={})
    base_dir = GOOD / "base"
    (tool,) = spec.tools
    assert (tool.kind, tool.target, tool.base_dir) == ("python", "good_base_tools:get_weather", base_dir)
    assert spec.prompts.system is not None
    assert spec.prompts.system.file == base_dir / "prompts" / "system.md.j2"
    assert "weather assistant for {{ city }}" in spec.prompts.system.text
    (hook,) = spec.hooks["turn_post"]
    assert hook.base_dir == base_dir
    assert spec.tests[0].cassette == base_dir / "cassettes" / "vancouver.jsonl"


def test_inline_template_remembers_its_file_and_line() -> None:
    spec = load_agent(GOOD / "weather.yaml", env={})
    assert spec.prompts.user is not None
    assert spec.prompts.user.origin == GOOD / "weather.yaml"
    assert spec.prompts.user.line == 11
    assert spec.prompts.user.file is None


def test_lists_and_scalars_of_the_child_replace_the_base(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(
        "version: 1\nname: base\nfunction_calling: native\ntools:\n  - builtin: time\n  - builtin: todo\n",
        encoding="utf-8",
    )
    (tmp_path / "child.yaml").write_text(
        "version: 1\nname: child\nextends: base.yaml\nfunction_calling: inline\ntools:\n  - builtin: files\n",
        encoding="utf-8",
    )
    spec = load_agent(tmp_path / "child.yaml", env={})
    assert [t.target for t in spec.tools] == ["files"]
    assert spec.function_calling == "inline"


def test_explain_names_the_file_that_set_each_top_level_value() -> None:
    agent_file = load_file(GOOD / "weather.yaml", env={})
    rows = {
        row.key: (Path(row.file).relative_to(GOOD).as_posix(), row.line)
        for row in explain(agent_file.document)
    }
    assert rows["name"] == ("weather.yaml", 4)
    assert rows["limits"] == ("layers/middle.yaml", 10)
    assert rows["tools"] == ("base/base.yaml", 19)
    assert "extends" not in rows


# --- team files -------------------------------------------------------------------------------------


def test_team_file_lists_its_agents_without_x_keys() -> None:
    agent_file = load_file(GOOD / "team.yaml", env={})
    assert agent_file.is_team
    assert agent_file.names == ("lead", "researcher")


def test_team_agent_refers_to_another_agent_of_the_file() -> None:
    spec = load_agent(GOOD / "team.yaml", env={})  # the first agent by default
    assert spec.name == "lead"
    assert spec.team == ("lead", "researcher")
    (tool,) = spec.tools
    assert (tool.kind, tool.target, tool.description) == ("agent", "#researcher", "Researches a topic.")
    assert spec.model is not None and spec.model.id == "openai/gpt-4o-mini"  # from the `<<` merge


def test_team_agent_that_extends_a_base_keeps_its_key_as_name() -> None:
    spec = load_agent(GOOD / "team.yaml", agent="researcher", env={})
    assert spec.name == "researcher"  # not the base's `name: base`
    assert spec.description == "Finds things."
    assert spec.tools[0].base_dir == GOOD / "base"


def test_unknown_team_agent_gets_a_suggestion() -> None:
    with pytest.raises(
        ConfigError, match=r"no agent named 'reseacher' in this file \(did you mean 'researcher'\?\)"
    ):
        load_agent(GOOD / "team.yaml", agent="reseacher", env={})


def test_x_keys_are_ignored_in_a_team_file_and_in_nested_mappings(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        "version: 1\nx-top: 1\nagents:\n  x-Draft: {model: [not, checked]}\n  solo:\n"
        "    model: {id: m, x-note: n}\n    tools: [{builtin: time, x-owner: me}]\n",
        encoding="utf-8",
    )
    assert check_file(path, env={}) == []
    spec = load_agent(path, env={})
    assert (spec.name, spec.team) == ("solo", ("solo",))


# --- ${ENV} -----------------------------------------------------------------------------------------


def test_whole_plain_reference_is_read_again_as_yaml() -> None:
    spec = load_agent(GOOD / "env_types.yaml", env={})
    assert spec.limits.max_steps == 10 and isinstance(spec.limits.max_steps, int)
    assert spec.limits.max_cost_usd == 0.25
    assert spec.model is not None
    assert spec.model.stream is False
    assert spec.model.temperature == 0.5


def test_value_from_the_environment_is_retyped_too() -> None:
    spec = load_agent(GOOD / "env_types.yaml", env={"RUNNER_GOOD_STEPS": "3", "RUNNER_GOOD_STREAM": "yes"})
    assert spec.limits.max_steps == 3
    assert spec.model is not None and spec.model.stream is True


def test_quoted_reference_stays_a_string() -> None:
    spec = load_agent(GOOD / "env_types.yaml", env={})
    assert spec.vars["quoted"] == "10"


def test_reference_inside_longer_text_stays_text() -> None:
    spec = load_agent(GOOD / "env_types.yaml", env={})
    assert spec.vars["mixed"] == "12"
    assert spec.description == "Costs ${HOME} nothing: really."


def test_double_dollar_writes_a_literal_reference() -> None:
    spec = load_agent(GOOD / "env_types.yaml", env={"NOT_A_VARIABLE": "expanded"})
    assert spec.vars["literal"] == "${NOT_A_VARIABLE}"


def test_values_of_secret_variables_are_collected() -> None:
    env = {"RUNNER_GOOD_API_KEY": "sk-test-123", "RUNNER_GOOD_TOKEN": "tok-456", "RUNNER_GOOD_MODEL": "m/x"}
    spec = load_agent(GOOD / "env_types.yaml", env=env)
    assert spec.secrets == {"sk-test-123", "tok-456"}
    assert spec.model is not None and spec.model.api_key == "sk-test-123"
    assert spec.tools[0].headers == {"Authorization": "Bearer tok-456"}


def test_secret_value_is_never_retyped() -> None:
    spec = load_agent(GOOD / "env_types.yaml", env={"RUNNER_GOOD_API_KEY": "12345"})
    assert spec.model is not None and spec.model.api_key == "12345"
    assert spec.secrets == {"12345"}


def test_empty_secret_default_is_no_secret_and_no_key() -> None:
    spec = load_agent(GOOD / "env_types.yaml", env={})
    assert spec.secrets == frozenset()
    assert spec.model is not None and spec.model.api_key is None


def test_secrets_of_a_base_file_reach_the_child(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(
        "version: 1\nname: base\nmodel: {id: m, api_key: '${RUNNER_T_API_KEY}'}\n", encoding="utf-8"
    )
    (tmp_path / "child.yaml").write_text("version: 1\nname: child\nextends: base.yaml\n", encoding="utf-8")
    spec = load_agent(tmp_path / "child.yaml", env={"RUNNER_T_API_KEY": "sk-base"})
    assert spec.secrets == {"sk-base"}


# --- YAML features ----------------------------------------------------------------------------------


def test_anchors_aliases_and_merge_keys() -> None:
    spec = load_agent(GOOD / "anchors.yaml", env={})
    assert spec.model is not None
    assert spec.model.id == "openai/gpt-4o-mini"
    assert spec.model.temperature == 0.9  # the first merged mapping wins
    assert spec.model.timeout_s == 10
    assert spec.model.retries == 1  # the mapping's own key wins
    assert [(t.target, t.confirm, t.timeout_s) for t in spec.tools] == [("time", True, 5), ("todo", False, 5)]
    assert spec.permissions.ask == spec.permissions.allow == ("time_*", "todo(item=*)")


def test_load_agent_raises_every_problem_of_a_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("version: 1\nname: bad\nmodle: x\nlimits: {max_steps: 0}\n", encoding="utf-8")
    with pytest.raises(ConfigErrors) as caught:
        load_agent(path, env={})
    assert [(e.line, e.path) for e in caught.value] == [(3, "modle"), (4, "limits.max_steps")]
