"""``runner render``, ``runner schema``, ``runner init`` and ``runner --version``."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from runner import __version__
from runner.agentfile import check_file, load_agent
from runner.cli import main
from runner.resources import data_dir

Invoke = Callable[..., Result]


# --- render -----------------------------------------------------------------------------------------


def test_render_prints_the_first_request_with_vars_and_input(
    cli: Invoke, good_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(good_dir)
    result = cli("render", "weather.yaml", "-p", "Rain today?", "--var", "units=kelvin")
    assert result.exit_code == 0, result.output
    today = dt.date.today().isoformat()
    head, tools = result.output.split("--- tools (1) ---\n")
    assert head == (
        "# agent: weather (weather.yaml)\n"
        "# model: openai/gpt-4o-mini\n"
        "# function calling: native (auto: litellm lists openai/gpt-4o-mini as supporting function calling)\n"
        "--- system ---\n"
        "You are weather, a weather assistant for Vancouver.\n"
        f"Answer in kelvin units. Today is {today}.\n"
        "\n"
        "--- user ---\n"
        "Question: Rain today?\n"
    )
    tool, params = tools.split("--- temperature ---\n")
    assert json.loads(tool)["function"]["name"] == "get_weather"
    assert params == "0.5\n"  # the model parameters the first request carries


def test_render_json_is_the_model_and_messages(
    cli: Invoke, good_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(good_dir)
    result = cli("render", "team.yaml", "--agent", "researcher", "--json", "-p", "Find it")
    assert result.exit_code == 0, result.output
    request = json.loads(result.stdout)
    assert request["model"] == "openai/gpt-4o-mini"
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    assert request["messages"][0]["content"].startswith(
        "You are researcher, a weather assistant for Vancouver."
    )
    assert request["messages"][1] == {"role": "user", "content": "Find it"}


def test_render_var_fills_a_variable_the_file_does_not_define(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.yaml").write_text(
        "version: 1\nname: a\nprompts:\n  system: 'Answer in {{ style }} style; {{ n + 1 }} lines.'\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    result = cli("render", "a.yaml", "--json", "--var", "style=terse", "--var", "n=2")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["messages"][0]["content"] == "Answer in terse style; 3 lines."
    missing = cli("render", "a.yaml")
    assert missing.exit_code == 2
    assert "a.yaml:4:11: prompts.system: template uses undefined variable 'n'" in missing.output


def test_render_fails_on_an_undefined_value_at_render_time(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `vars` is always defined, so only rendering (StrictUndefined) finds that `vars.units` is not
    (tmp_path / "a.yaml").write_text(
        "version: 1\nname: a\nprompts:\n  system: |\n    Hello.\n    Units: {{ vars.units }}\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    assert cli("validate", "a.yaml").exit_code == 0
    result = cli("render", "a.yaml")
    assert result.exit_code == 2
    assert result.output.startswith("a.yaml:6:1: template: undefined variable:")
    assert "'units'" in result.output
    assert cli("render", "a.yaml", "--var", "units=si").exit_code == 0


def test_render_sandbox_refuses_unsafe_attribute_access(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.yaml").write_text(
        'version: 1\nname: a\nprompts:\n  system: "{{ input.__class__.__mro__ }}"\n', encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    result = cli("render", "a.yaml")
    assert result.exit_code == 2
    assert result.output.startswith("a.yaml:4:1: template:")


def test_render_of_an_invalid_file_exits_2(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.yaml").write_text("version: 1\nname: a\nmodle: x\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = cli("render", "a.yaml")
    assert result.exit_code == 2
    assert result.output.strip() == "a.yaml:3:1: modle: unknown key 'modle' (did you mean 'model'?)"


# --- schema -----------------------------------------------------------------------------------------


def test_schema_prints_the_schema_file_unchanged(cli: Invoke) -> None:
    result = cli("schema")
    assert result.exit_code == 0
    assert result.stdout == (data_dir("schemas") / "agent.schema.json").read_text(encoding="utf-8")
    assert json.loads(result.stdout)["title"] == "runner agent file"


def test_schema_with_an_unknown_name_exits_2(cli: Invoke) -> None:
    result = cli("schema", "nope")
    assert result.exit_code == 2
    assert "no schema named 'nope'" in result.output
    # issue 23 item 21: the hint named only `agent`
    assert "the schemas are: agent, cassette, transcript" in result.output


# --- init -------------------------------------------------------------------------------------------


def test_init_creates_an_agent_that_validates(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli("init", "my-agent")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "created my-agent/agent.yaml",
        "created my-agent/my_agent_tools.py",
        "created my-agent/tests/test_my_agent_tools.py",
        "created my-agent/.gitignore",
        "next: runner validate my-agent/agent.yaml && runner render my-agent/agent.yaml",
        "then, with a model key: runner test my-agent/agent.yaml --update   (records the test's cassette;",
        "      afterwards `runner test my-agent/agent.yaml` replays it offline, e.g. in CI)",
    ]
    agent = tmp_path / "my-agent" / "agent.yaml"
    assert check_file(agent, env={}) == []
    spec = load_agent(agent, env={})
    assert spec.name == "my-agent"
    assert [(t.kind, t.target) for t in spec.tools] == [("python", "my_agent_tools")]
    assert cli("validate", "my-agent/agent.yaml").exit_code == 0
    assert cli("render", "my-agent/agent.yaml").exit_code == 0
    assert ".runner/" in (tmp_path / "my-agent" / ".gitignore").read_text().splitlines()
    # the README's local-server line: OPENAI_BASE_URL reaches the agent (the fast path, no key needed)
    local = load_agent(agent, env={"OPENAI_BASE_URL": "http://127.0.0.1:8700/v1"})
    assert local.model.api_base == "http://127.0.0.1:8700/v1"


def test_init_takes_the_name_option(cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli("init", "--name", "helper").exit_code == 0
    assert load_agent(tmp_path / "agent.yaml", env={}).name == "helper"
    assert (tmp_path / "helper_tools.py").is_file()


def test_init_refuses_to_overwrite_existing_files(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agent.yaml").write_text("keep me\n", encoding="utf-8")
    result = cli("init", "--name", "helper")
    assert result.exit_code == 2
    assert "refusing to overwrite existing files" in result.output
    assert (tmp_path / "agent.yaml").read_text(encoding="utf-8") == "keep me\n"
    assert not (tmp_path / "helper_tools.py").exists()


def test_init_refuses_an_invalid_name(cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli("init", "--name", "Bad Name")
    assert result.exit_code == 2
    assert "invalid agent name 'Bad Name'" in result.output
    assert list(tmp_path.iterdir()) == []


def test_init_in_a_folder_with_a_space_prints_commands_to_copy_and_passes_ruff(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 23 item 21: "runner validate my agent/agent.yaml" ran on two paths; the test's
    # E402 suppression comment is unused (ruff allows imports after sys.path.insert), so RUF100 failed
    import subprocess
    import sys

    monkeypatch.chdir(tmp_path)
    result = cli("init", "my agent")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "created 'my agent/agent.yaml'"
    assert lines[4] == "next: runner validate 'my agent/agent.yaml' && runner render 'my agent/agent.yaml'"
    ruff = Path(sys.executable).parent / "ruff"
    for config in (["--isolated", "--select", "E,F,I,RUF100"], []):  # ruff's defaults; this repository's
        checked = subprocess.run(
            [str(ruff), "check", *config, "."], cwd=tmp_path / "my agent", capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stdout


# --- version ----------------------------------------------------------------------------------------


def test_version_option_prints_the_version(cli: Invoke) -> None:
    result = cli("--version")
    assert result.exit_code == 0
    assert result.output == f"runner {__version__}\n"


# --- the top-level help -------------------------------------------------------------------------------


def _commands_panel(output: str) -> list[tuple[str, list[str]]]:
    """The rows of the help's Commands box: each command with the lines of its description."""
    rows: list[tuple[str, list[str]]] = []
    inside = False
    for line in output.splitlines():
        if "Commands" in line and line.lstrip().startswith("╭"):
            inside = True
            continue
        if not inside or line.lstrip().startswith("╰"):
            inside = False
            continue
        body = line.strip().strip("│").rstrip()
        name, text = body[1:10].strip(), body[11:].strip()
        if name:
            rows.append((name, [text]))
        elif rows:
            rows[-1][1].append(text)
    return rows


@pytest.mark.parametrize("columns", ["80", "100", "140"])
def test_help_lists_commands_in_the_order_they_are_used(cli: Invoke, columns: str) -> None:
    # issue 23 item 21: they came in registration order (validate, schema, render, init, ...)
    result = cli("--help", env={"COLUMNS": columns})
    assert result.exit_code == 0, result.output
    names = [name for name, _ in _commands_panel(result.output)]
    assert names[:6] == ["init", "validate", "render", "tools", "run", "test"]
    registered = [c.name or getattr(c.callback, "__name__", "") for c in main.app.registered_commands]
    assert sorted(names) == sorted(registered)  # every command is listed, once


@pytest.mark.parametrize("columns", ["80", "100", "140"])
def test_help_wraps_every_description_as_one_paragraph(cli: Invoke, columns: str) -> None:
    # issue 23 item 21: diff's two-line docstring summary broke its row after "limits,"
    result = cli("--help", env={"COLUMNS": columns})
    rows = _commands_panel(result.output)
    width = max(len(text) for _, lines in rows for text in lines)
    for name, lines in rows:
        for line, after in itertools.pairwise(lines):
            next_word = after.split()[0]
            assert len(line) + 1 + len(next_word) > width, f"{name}: broken after {line!r}"
    diff = next(" ".join(lines) for name, lines in rows if name == "diff")
    assert "every agent and the workflow" in diff
