"""`runner batch TEAM.yaml --agent NAME --backend ray`: the named team agent runs on the Ray actors
(a real local Ray cluster, ``ray_cluster``), not the file's first agent; a workflow is refused on Ray."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from runner.testing import ScriptedServer
from tests.batch.conftest import RayCluster
from tests.batch.helpers import read_out, write_inputs
from tests.cli_run.conftest import Cli
from tests.workflow.helpers import Models, team, user_text

if importlib.util.find_spec("ray") is None:  # not imported here: runner sets its environment first
    pytest.skip(
        "ray is not installed (the project's ray extra: pip install -e '.[ray]')", allow_module_level=True
    )
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]  # one cluster, one worker

WORKFLOW = """workflow:
  - {id: one, agent: first, input: "one {{ input }}"}
  - {id: two, agent: second, input: "two {{ steps.one.output }}"}
"""


def test_agent_runs_the_named_team_agent_on_ray_and_a_workflow_is_refused(
    cli: Cli, tmp_path: Path, ray_cluster: RayCluster
) -> None:
    models = Models(
        {"first": lambda b: "F(" + user_text(b) + ")", "second": lambda b: "S(" + user_text(b) + ")"}
    )
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"first": "", "second": ""}, WORKFLOW)
        inputs = write_inputs(tmp_path / "in.jsonl", ["a", "b", "c"])
        ray = ["--backend", "ray", "--address", ray_cluster.address]
        done = cli("batch", str(path), str(inputs), "-o", "out.jsonl", "--agent", "second", *ray)
        assert done.returncode == 0, done.stderr
        assert [line["answer"] for line in read_out(tmp_path / "out.jsonl")] == ["S(a)", "S(b)", "S(c)"]
        assert models.calls == {"second": 3}  # not the file's first agent
        refused = cli("batch", str(path), str(inputs), "-o", "wf.jsonl", *ray)
    assert refused.returncode == 2 and "runs on the local backend, not on Ray" in refused.stderr
    assert not (tmp_path / "wf.jsonl").exists()
