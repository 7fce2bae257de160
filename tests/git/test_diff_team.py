"""``runner diff`` of a team file compares every agent and the workflow, and says so (issue 23, 13)."""

from __future__ import annotations

import json
from collections.abc import Callable

from typer.testing import Result

from .conftest import Repo

Cli = Callable[..., Result]

TEAM = """\
version: 1
agents:
  writer:
    model: {{id: openai/m, api_base: "http://127.0.0.1:9/v1"}}
    prompts: {{system: "Write a draft."}}
  critic:
    model: {{id: openai/m, api_base: "http://127.0.0.1:9/v1"}}
    prompts: {{system: "{critic}"}}
workflow:
  steps:
    - id: draft
      agent: writer
    - id: polish
      loop:
        max_iterations: {iterations}
        until: "steps.review.output == 'ok'"
        steps:
          - id: review
            agent: critic
            input: "{review_input}"
"""


def _team(
    critic: str = "Criticize it.", iterations: int = 3, review_input: str = "{{ steps.draft.output }}"
) -> str:
    return TEAM.format(critic=critic, iterations=iterations, review_input=review_input)


def test_the_second_agents_prompt_is_compared(cli: Cli, repo: Repo) -> None:
    repo.commit({"team.yaml": _team()})
    repo.write({"team.yaml": _team(critic="Criticize it harshly.")})
    team = str(repo.path / "team.yaml")
    result = cli("diff", team, "--exit-code")
    assert result.exit_code == 1, result.output
    out = result.stdout
    assert "compared: agents writer, critic and the workflow;" in out
    assert "agent critic:\n" in out and "agent writer:" not in out
    assert "  -Criticize it.\n" in out and "  +Criticize it harshly.\n" in out
    data = json.loads(cli("diff", team, "--json").stdout)
    assert data["same"] is False
    assert data["compared"]["agents"] == ["writer", "critic"] and data["compared"]["workflow"] is True
    assert data["agents"]["writer"]["same"] is True and data["agents"]["critic"]["same"] is False
    assert "system" in data["agents"]["critic"]["prompts"]


def test_a_loops_max_iterations_is_compared(cli: Cli, repo: Repo) -> None:
    repo.commit({"team.yaml": _team()})
    repo.write({"team.yaml": _team(iterations=5)})
    team = str(repo.path / "team.yaml")
    result = cli("diff", team, "--exit-code")
    assert result.exit_code == 1, result.output
    assert "workflow:\n  steps[1].max_iterations: 3 -> 5\n" in result.stdout
    data = json.loads(cli("diff", team, "--json").stdout)
    assert data["same"] is False
    assert data["workflow"] == [{"path": "workflow.steps[1].max_iterations", "before": 3, "after": 5}]
    assert cli("diff", team).exit_code == 0  # a difference fails only with --exit-code


def test_a_step_template_and_added_agents_are_compared(cli: Cli, repo: Repo) -> None:
    repo.commit({"team.yaml": _team()})
    extra = '  editor:\n    model: {id: openai/m, api_base: "http://127.0.0.1:9/v1"}\nworkflow:'
    repo.write(
        {"team.yaml": _team(review_input="Review: {{ steps.draft.output }}").replace("workflow:", extra)}
    )
    data = json.loads(cli("diff", str(repo.path / "team.yaml"), "--json").stdout)
    assert data["agents_added"] == ["editor"] and data["agents_removed"] == []
    (change,) = data["workflow"]
    assert change["path"] == "workflow.steps[1].steps[0].input"
    assert change["after"] == "Review: {{ steps.draft.output }}"


def test_no_differences_says_what_was_compared(cli: Cli, repo: Repo) -> None:
    repo.commit({"team.yaml": _team()})
    team = str(repo.path / "team.yaml")
    result = cli("diff", team, "--exit-code")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("no differences between team.yaml@HEAD (")
    assert "compared: agents writer, critic and the workflow;" in result.stdout
    assert json.loads(cli("diff", team, "--json").stdout)["same"] is True


def test_agent_picks_one_member_and_leaves_the_workflow_out(cli: Cli, repo: Repo) -> None:
    repo.commit({"team.yaml": _team()})
    repo.write({"team.yaml": _team(critic="Be kind.", iterations=9)})
    team = str(repo.path / "team.yaml")
    data = json.loads(cli("diff", team, "--agent", "writer", "--json").stdout)
    assert data["same"] is True
    assert data["compared"]["agents"] == ["writer"] and data["compared"]["workflow"] is False
    assert json.loads(cli("diff", team, "--agent", "critic", "--json").stdout)["same"] is False
