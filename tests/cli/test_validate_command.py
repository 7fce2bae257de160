"""``runner validate AGENT...``: exit 0 when valid, 2 when not, errors as FILE:LINE:COL: PATH: message."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from runner.resources import packaged_agents_dir

Invoke = Callable[..., Result]

BAD_TEXT = "version: 1\nname: weather\nfunction_calling: nativ\n"


def test_valid_file_prints_ok_with_its_agents_and_exits_0(
    cli: Invoke, good_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(good_dir)
    result = cli("validate", "weather.yaml", "team.yaml")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["weather.yaml: ok (weather)", "team.yaml: ok (lead, researcher)"]


def test_any_invalid_file_makes_the_exit_code_2_and_every_file_is_reported(
    cli: Invoke, good_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bad.yaml").write_text(BAD_TEXT, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = cli("validate", "bad.yaml", str(good_dir / "minimal.yaml"), "missing.yaml")
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert lines[0] == (
        'bad.yaml:3:19: function_calling: "nativ" is not one of: auto, native, prompt, inline '
        "(did you mean 'native'?)"
    )
    assert lines[1].endswith("minimal.yaml: ok (minimal)")
    assert lines[2] == "missing.yaml: file not found"


def test_explain_shows_which_file_set_each_top_level_value(
    cli: Invoke, good_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(good_dir)
    result = cli("validate", "--explain", "weather.yaml")
    assert result.exit_code == 0, result.output
    rows = {}
    for line in result.output.splitlines()[2:]:
        key, where = line.split()
        rows[key] = where
    assert result.output.splitlines()[:2] == ["weather.yaml: ok (weather)", "  weather:"]
    assert rows == {
        "version": "weather.yaml:3",
        "name": "weather.yaml:4",
        "description": "layers/middle.yaml:5",
        "model": "layers/middle.yaml:7",
        "prompts": "weather.yaml:10",
        "vars": "weather.yaml:7",
        "tools": "base/base.yaml:19",
        "hooks": "base/base.yaml:23",
        "limits": "layers/middle.yaml:10",
        "tests": "base/base.yaml:31",
        "permissions": "weather.yaml:13",
    }


def test_explain_of_a_team_file_lists_each_agent(
    cli: Invoke, good_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(good_dir)
    result = cli("validate", "--explain", "team.yaml")
    assert result.exit_code == 0, result.output
    assert "  lead:" in result.output and "  researcher:" in result.output
    assert "    model              base/base.yaml:7" in result.output  # researcher extends the base


def test_json_output_lists_files_agents_and_located_errors(
    cli: Invoke, good_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bad.yaml").write_text(BAD_TEXT, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = cli("validate", "--json", "bad.yaml", str(good_dir / "weather.yaml"))
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    assert report[0] == {
        "file": "bad.yaml",
        "valid": False,
        "errors": [
            {
                "file": "bad.yaml",
                "line": 3,
                "column": 19,
                "path": "function_calling",
                "message": "\"nativ\" is not one of: auto, native, prompt, inline (did you mean 'native'?)",
                "hint": None,
            }
        ],
    }
    assert report[1]["valid"] is True
    assert report[1]["errors"] == []
    assert report[1]["agents"] == ["weather"]


def test_json_output_with_explain_includes_the_sources(
    cli: Invoke, good_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(good_dir)
    result = cli("validate", "--json", "--explain", "weather.yaml")
    assert result.exit_code == 0
    (entry,) = json.loads(result.stdout)
    assert {"key": "tools", "file": "base/base.yaml", "line": 19} in entry["explain"]["weather"]


def test_directory_argument_checks_every_yaml_file_below_it(
    cli: Invoke, good_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(good_dir.parent)
    result = cli("validate", "good")
    assert result.exit_code == 0, result.output
    checked = sorted(line.split(":")[0] for line in result.output.splitlines())
    assert checked == sorted(str(p.relative_to(good_dir.parent)) for p in good_dir.rglob("*.yaml"))
    assert "good/layers/middle.yaml" in checked


def test_directory_with_a_bad_file_exits_2(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "agents" / "sub").mkdir(parents=True)
    (tmp_path / "agents" / "ok.yml").write_text("version: 1\nname: ok\n", encoding="utf-8")
    (tmp_path / "agents" / "sub" / "bad.yaml").write_text(BAD_TEXT, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = cli("validate", "agents")
    assert result.exit_code == 2
    assert "agents/ok.yml: ok (ok)" in result.output
    assert "agents/sub/bad.yaml:3:19: function_calling:" in result.output


def test_directory_without_agent_files_is_an_error(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    result = cli("validate", "empty")
    assert result.exit_code == 2
    assert result.output.strip() == "empty: no .yaml or .yml files in this directory"


def test_name_is_looked_up_in_local_agents_before_the_packaged_ones(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packaged = tmp_path / "packaged"
    packaged.mkdir()
    (packaged / "helper.yaml").write_text("version: 1\nname: packaged-helper\n", encoding="utf-8")
    (packaged / "other.yaml").write_text("version: 1\nname: packaged-other\n", encoding="utf-8")
    monkeypatch.setattr("runner.agentfile.files.packaged_agents_dir", lambda: packaged)
    project = tmp_path / "project"
    (project / "agents").mkdir(parents=True)
    (project / "agents" / "helper.yml").write_text("version: 1\nname: local-helper\n", encoding="utf-8")
    monkeypatch.chdir(project)
    result = cli("validate", "helper", "other")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "agents/helper.yml: ok (local-helper)",
        f"{packaged / 'other.yaml'}: ok (packaged-other)",
    ]


def test_unknown_name_gets_a_suggestion(cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "weather.yaml").write_text("version: 1\nname: weather\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = cli("validate", "wether")
    assert result.exit_code == 2
    assert result.output.startswith("error: no agent file or agent named 'wether' (did you mean 'weather'?)")


def test_every_packaged_agent_is_valid_and_found_by_name(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = sorted(p.stem for p in packaged_agents_dir().glob("*.yaml"))
    assert names, "the package ships no agent"
    monkeypatch.chdir(tmp_path)  # no ./agents/ here
    result = cli("validate", *names)
    assert result.exit_code == 0, result.output
    assert len(result.output.splitlines()) == len(names)


def test_var_option_defines_a_template_variable(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.yaml").write_text(
        "version: 1\nname: a\nprompts:\n  system: 'Answer in {{ style }} style.'\n", encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    without = cli("validate", "a.yaml")
    assert without.exit_code == 2
    assert "a.yaml:4:11: prompts.system: template uses undefined variable 'style'" in without.output
    assert cli("validate", "--var", "style=plain", "a.yaml").exit_code == 0


def test_malformed_var_option_is_a_usage_error(cli: Invoke, good_dir: Path) -> None:
    result = cli("validate", "--var", "no-equals-sign", str(good_dir / "minimal.yaml"))
    assert result.exit_code == 2
    assert result.output.strip() == "error: --var expects NAME=VALUE, got 'no-equals-sign'"


def test_environment_of_the_process_is_interpolated(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.yaml").write_text(
        "version: 1\nname: a\nlimits:\n  max_steps: ${RUNNER_T_STEPS}\n", encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    assert cli("validate", "a.yaml", env={"RUNNER_T_STEPS": "4"}).exit_code == 0
    result = cli("validate", "a.yaml", env={"RUNNER_T_STEPS": "four"})
    assert result.exit_code == 2
    assert 'a.yaml:4:14: limits.max_steps: expected an integer, got "four"' in result.output


MANY_MISTAKES = """\
version: 1
name: many
model:
  id: openai/gpt-4o-mini
  api_base: ${H13_UNSET_BASE}
function_calling: nativ
prompts:
  system: "Hello {{ styel }}"
vars:
  style: plain
tools:
  - agent: "#nobody"
  - builtin: time
    with: {bogus: 1}
limits:
  max_steps: ${H13_UNSET_STEPS}
"""


def test_every_mistake_of_a_file_is_reported_in_one_run(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "many.yaml").write_text(MANY_MISTAKES, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = cli("validate", "many.yaml")
    assert result.exit_code == 2
    located = [line.split(": ", 2)[:2] for line in result.stderr.splitlines()]
    assert located == [
        ["many.yaml:5:13", "model.api_base"],  # an unset variable (all of them) ...
        ["many.yaml:6:19", "function_calling"],  # ... a schema error ...
        ["many.yaml:8:11", "prompts.system"],  # ... a template's undefined variable ...
        ["many.yaml:12:12", "tools[0].agent"],  # ... a team reference ...
        ["many.yaml:13:5", "tools[1].with.bogus"],  # ... a built-in toolset's option ...
        ["many.yaml:16:14", "limits.max_steps"],  # ... and the second unset variable
    ]
    assert "H13_UNSET_BASE is not set" in result.stderr and "H13_UNSET_STEPS is not set" in result.stderr
    assert "'styel' (did you mean 'style'?)" in result.stderr
    assert "no agent named 'nobody'" in result.stderr and "unknown option 'bogus'" in result.stderr
    assert result.stdout == ""


def test_json_output_lists_every_mistake_in_the_same_shape(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "many.yaml").write_text(MANY_MISTAKES, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = cli("validate", "--json", "many.yaml")
    assert result.exit_code == 2
    (entry,) = json.loads(result.stdout)
    assert set(entry) == {"file", "valid", "errors"} and entry["valid"] is False
    assert [(e["line"], e["path"]) for e in entry["errors"]] == [
        (5, "model.api_base"),
        (6, "function_calling"),
        (8, "prompts.system"),
        (12, "tools[0].agent"),
        (13, "tools[1].with.bogus"),
        (16, "limits.max_steps"),
    ]
    assert all(set(e) == {"file", "line", "column", "path", "message", "hint"} for e in entry["errors"])
    assert {e["file"] for e in entry["errors"]} == {"many.yaml"}


SCRIPT = "# replies of a scripted model\nscript:\n  - content: hello\n"
FRAGMENT = "version: 1\nmodel: openai/gpt-4o-mini\nlimits:\n  max_steps: 3\n"


def _folder_of_agents_and_other_yaml(root: Path) -> Path:
    folder = root / "agents"
    (folder / "scripts").mkdir(parents=True)
    (folder / "shared").mkdir()
    (folder / "scripts" / "hello.yaml").write_text(SCRIPT, encoding="utf-8")
    (folder / "shared" / "base.yaml").write_text(FRAGMENT, encoding="utf-8")
    (folder / "hello.yaml").write_text(
        "version: 1\nname: hello\nextends: shared/base.yaml\n", encoding="utf-8"
    )
    return folder


def test_a_folder_skips_scripts_and_fragments_with_one_note(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _folder_of_agents_and_other_yaml(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = cli("validate", "agents")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["agents/hello.yaml: ok (hello)"]
    assert result.stderr.splitlines() == [
        "skipped 2 files that are not agents: agents/scripts/hello.yaml (no version:); "
        "agents/shared/base.yaml (only extended by other files)"
    ]


def test_a_broken_agent_among_skipped_files_is_still_reported(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _folder_of_agents_and_other_yaml(tmp_path)
    (folder / "bad.yaml").write_text(BAD_TEXT, encoding="utf-8")
    (folder / "forgot.yaml").write_text("name: forgot\n", encoding="utf-8")  # an agent without its version
    monkeypatch.chdir(tmp_path)
    result = cli("validate", "agents")
    assert result.exit_code == 2
    assert "agents/bad.yaml:3:19: function_calling:" in result.stderr
    assert "agents/forgot.yaml:1:1: missing required key 'version'" in result.stderr
    assert "agents/hello.yaml: ok (hello)" in result.stdout
    assert "skipped 2 files that are not agents" in result.stderr


def test_json_marks_the_skipped_files(cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _folder_of_agents_and_other_yaml(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = cli("validate", "--json", "agents")
    assert result.exit_code == 0, result.output
    report = {entry["file"]: entry for entry in json.loads(result.stdout)}
    assert report["agents/scripts/hello.yaml"] == {
        "file": "agents/scripts/hello.yaml",
        "valid": True,
        "errors": [],
        "agents": [],
        "skipped": "no version:",
    }
    assert report["agents/shared/base.yaml"]["skipped"] == "only extended by other files"
    assert "skipped" not in report["agents/hello.yaml"] and report["agents/hello.yaml"]["agents"] == ["hello"]
    assert result.stderr == ""


def test_a_non_agent_file_named_on_the_command_line_is_an_error(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _folder_of_agents_and_other_yaml(tmp_path)
    monkeypatch.chdir(folder)
    result = cli("validate", "scripts/hello.yaml")
    assert result.exit_code == 2
    assert result.stderr.startswith("scripts/hello.yaml: not an agent file: it has no version: key")
    assert "unknown key" not in result.stderr


def test_a_folder_of_only_non_agents_is_an_error(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _folder_of_agents_and_other_yaml(tmp_path)
    monkeypatch.chdir(folder)
    result = cli("validate", "scripts")
    assert result.exit_code == 2
    assert "scripts: no agent files in this directory (1 YAML file that is not an agent)" in result.stderr


def test_the_repository_examples_validate(cli: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    result = cli("validate", "examples")
    assert result.exit_code == 0, result.output
    assert "examples/team.yaml: ok (lead, meteorologist, calc)" in result.stdout
    (note,) = result.stderr.splitlines()
    assert note.startswith("skipped ") and "examples/scripts/weather.yaml" in note
    assert "examples/shared/base.yaml (only extended by other files)" in note
