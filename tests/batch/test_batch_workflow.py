"""`runner batch TEAM.yaml`: a team file's workflow per input, end to end against the scripted server."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

from runner.store.transcript import read_transcript
from runner.testing import ScriptedServer
from tests.batch.helpers import Raw, make_agent, read_out, write_inputs
from tests.cli_run.conftest import Cli
from tests.workflow.helpers import Models, events, team, user_text

TWO_STEPS = """workflow:
  - {id: one, agent: first, input: "one {{ input }}"}
  - {id: two, agent: second, input: "two {{ steps.one.output }} {{ vars.tone }}"}
"""

PLANNER = """output:
  type: object
  required: [tasks]
  properties:
    tasks: {type: array, items: {type: string}}
"""


def _wait_for_lines(path: Path, count: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        if sum(line.endswith("}") for line in text.splitlines()) >= count:  # whole lines only
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} never had {count} lines")


def _models(**overrides: Any) -> Models:
    answers = {
        "first": lambda body: "F(" + user_text(body) + ")",
        "second": lambda body: "S(" + user_text(body) + ")",
    }
    answers.update(overrides)
    return Models(answers)


def _team(tmp_path: Path, server: ScriptedServer, workflow: str = TWO_STEPS, **extra: str) -> Path:
    agents = {"first": extra.get("first", ""), "second": extra.get("second", "")}
    return team(tmp_path, server.base_url, agents, workflow)


def test_each_input_runs_the_workflow_a_line_each_with_its_output_and_transcripts(
    cli: Cli, tmp_path: Path
) -> None:
    models = _models()
    items = ["a", {"id": "b", "input": "bee", "vars": {"tone": "wet"}}, "c", "d"]
    with ScriptedServer(models) as server:
        path = _team(tmp_path, server)
        inputs = write_inputs(tmp_path / "in.jsonl", items)
        done = cli("batch", str(path), str(inputs), "-o", "out.jsonl", "--var", "tone=dry", "--json")
    assert done.returncode == 0, done.stderr
    lines = read_out(tmp_path / "out.jsonl")
    assert [line["id"] for line in lines] == [1, "b", 3, 4]
    assert [line["answer"] for line in lines] == [
        "S(two F(one a) dry)",
        "S(two F(one bee) wet)",  # the item's vars over --var
        "S(two F(one c) dry)",
        "S(two F(one d) dry)",
    ]
    assert models.calls == {"first": 4, "second": 4}
    for line in lines:
        assert line["status"] == "ok" and line["error"] is None and line["output"] is None
        assert line["steps"] == 2 and line["reason"] == "done" and line["attempts"] == 1
        assert line["usage"]["total_tokens"] == 40  # two steps of 20 tokens each, summed
        record = cli.home / "sessions" / f"{line['session_id']}.jsonl"
        header = read_transcript(record).header
        assert header["workflow"] and header["input"] in ("a", "bee", "c", "d")
        ends = {e["key"]: e for e in events(record, "step_end")}
        assert set(ends) == {"one", "two"} and all(e["status"] == "ok" for e in ends.values())
        for end in ends.values():  # each step a child session with a transcript of its own
            child = read_transcript(cli.home / "sessions" / f"{end['session_id']}.jsonl")
            assert [m["role"] for m in child.messages()][-2:] == ["user", "assistant"]
    assert len(cli.transcripts()) == 4 * 3
    summary = json.loads(done.stdout)
    assert summary["ok"] == 4 and summary["tokens"] == 160 and summary["exit_code"] == 0


def test_an_output_schema_workflow_writes_the_object_and_its_json_text(cli: Cli, tmp_path: Path) -> None:
    workflow = """workflow:
  output_schema: {type: object, required: [tasks]}
  steps:
    - {id: plan, agent: first}
"""
    models = _models(first=lambda body: {"tasks": [user_text(body), "more"]})
    with ScriptedServer(models) as server:
        path = _team(tmp_path, server, workflow, first=PLANNER)
        inputs = write_inputs(tmp_path / "in.jsonl", ["x", "y", "z"])
        done = cli("batch", str(path), str(inputs), "-o", "out.jsonl")
    assert done.returncode == 0, done.stderr
    lines = read_out(tmp_path / "out.jsonl")
    assert [line["output"] for line in lines] == [{"tasks": [n, "more"]} for n in "xyz"]
    assert [json.loads(line["answer"]) for line in lines] == [line["output"] for line in lines]


def test_a_step_failing_in_one_item_makes_that_line_an_error_and_the_others_go_on(
    cli: Cli, tmp_path: Path
) -> None:
    def second(body: dict[str, Any]) -> Any:
        text = user_text(body)
        return {"status": 400, "error": "the model refuses"} if "bad" in text else "S(" + text + ")"

    models = _models(second=second)
    with ScriptedServer(models) as server:
        path = _team(tmp_path, server)
        inputs = write_inputs(tmp_path / "in.jsonl", ["a", "bad", Raw("{nope"), "c"])
        done = cli("batch", str(path), str(inputs), "-o", "out.jsonl", "--var", "tone=t")
    assert done.returncode == 1, done.stderr
    lines = read_out(tmp_path / "out.jsonl")
    assert [line["status"] for line in lines] == ["ok", "error", "error", "ok"]
    assert lines[2]["error"].startswith("input line 3: not JSON") and lines[2]["attempts"] == 0
    assert models.calls == {"first": 3, "second": 3}  # the malformed line ran no step
    bad = lines[1]
    assert bad["error"].startswith("step two failed:") and "refuses" in bad["error"]
    assert bad["transient"] is False and bad["answer"] == "" and bad["steps"] == 2
    ends = {
        e["key"]: e["status"]
        for e in events(cli.home / "sessions" / f"{bad['session_id']}.jsonl", "step_end")
    }
    assert ends == {"one": "ok", "two": "error"}
    assert "2 failed" in done.stderr and "Traceback" not in done.stderr


LOOP = """workflow:
  - id: review
    loop:
      max_iterations: 2
      until: steps.critic.output.approved
      steps:
        - {id: critic, agent: first, input: "draft {{ iteration }} of {{ input }}"}
"""

CRITIC = """output:
  type: object
  required: [approved]
  properties: {approved: {type: boolean}}
"""


def test_a_loop_that_hits_max_iterations_makes_the_line_limit(cli: Cli, tmp_path: Path) -> None:
    models = _models(first=lambda body: {"approved": "easy" in user_text(body)})
    with ScriptedServer(models) as server:
        path = _team(tmp_path, server, LOOP, first=CRITIC)
        inputs = write_inputs(tmp_path / "in.jsonl", ["easy", "hard"])
        done = cli("batch", str(path), str(inputs), "-o", "out.jsonl")
    assert done.returncode == 1, done.stderr
    easy, hard = read_out(tmp_path / "out.jsonl")
    assert easy["status"] == "ok" and easy["steps"] == 1 and easy["output"] == {"approved": True}
    assert hard["status"] == "limit" and hard["steps"] == 2 and hard["reason"] == "limit"
    assert "stopped at max_iterations (2)" in hard["error"]
    assert "1 limit" in done.stderr


def test_max_tokens_spent_mid_batch_starts_no_new_workflow_and_exits_3(cli: Cli, tmp_path: Path) -> None:
    models = _models()
    with ScriptedServer(models) as server:
        path = _team(tmp_path, server)
        inputs = write_inputs(tmp_path / "in.jsonl", [f"n{n}" for n in range(5)])
        args = ["batch", str(path), str(inputs), "-o", "out.jsonl", "-c", "1", "--var", "tone=t"]
        done = cli(*args, "--max-tokens", "50", "--json")
        # 40 tokens a workflow (two steps): the second starts at 40, none after 80
        assert done.returncode == 3, done.stderr
        assert [line["id"] for line in read_out(tmp_path / "out.jsonl")] == [1, 2]
        assert models.calls == {"first": 2, "second": 2}
        summary = json.loads(done.stdout)
        assert summary["not_started"] == 3 and "--max-tokens 50" in summary["stopped"]
        assert "3 items not started" in done.stderr
        again = cli(*args, "--max-tokens", "1000")  # a higher budget goes on with the rest
    assert again.returncode == 0, again.stderr
    assert [line["id"] for line in read_out(tmp_path / "out.jsonl")] == [1, 2, 3, 4, 5]
    assert models.calls == {"first": 5, "second": 5}


def test_retries_run_a_transiently_failed_workflow_again_without_paying_its_finished_steps_twice(
    cli: Cli, tmp_path: Path
) -> None:
    failed: set[str] = set()

    def second(body: dict[str, Any]) -> Any:
        text = user_text(body)
        if "flaky" in text and text not in failed:
            failed.add(text)
            return {"status": 429, "error": "slow down"}
        return "S(" + text + ")"

    models = _models(second=second)
    with ScriptedServer(models) as server:
        path = _team(tmp_path, server)
        inputs = write_inputs(tmp_path / "in.jsonl", ["flaky 1", "steady"])
        once = cli("batch", str(path), str(inputs), "-o", "out.jsonl", "--var", "tone=t")
        assert once.returncode == 1
        first = read_out(tmp_path / "out.jsonl")[0]
        assert first["status"] == "error" and first["transient"] is True and "429" in first["error"]
        models.calls.clear()
        inputs = write_inputs(tmp_path / "in2.jsonl", ["flaky 2", "steady"])
        done = cli("batch", str(path), str(inputs), "-o", "out2.jsonl", "--var", "tone=t", "--retries", "2")
    assert done.returncode == 0, done.stderr
    flaky, steady = read_out(tmp_path / "out2.jsonl")
    assert flaky["status"] == "ok" and flaky["attempts"] == 2 and flaky["answer"] == "S(two F(one flaky 2) t)"
    assert steady["attempts"] == 1
    # step one ran once per item (the retry reused it); step two twice for the flaky item
    assert models.calls == {"first": 2, "second": 3}
    # the line's usage is what both steps spent (the 429 had none), step one's counted once
    assert flaky["usage"]["total_tokens"] == 40 and flaky["steps"] == 2
    record = cli.home / "sessions" / f"{flaky['session_id']}.jsonl"  # one transcript, resumed
    assert len(events(record, "resume")) == 1
    assert [(e["key"], e["status"]) for e in events(record, "step_end")] == [
        ("one", "ok"),
        ("two", "error"),
        ("two", "ok"),
    ]


def test_a_rerun_runs_only_the_items_that_did_not_end_ok(cli: Cli, tmp_path: Path) -> None:
    broken = {"b"}

    def second(body: dict[str, Any]) -> Any:
        text = user_text(body)
        if any(f"one {name})" in text for name in broken):
            return {"status": 400, "error": "no"}
        return "S(" + text + ")"

    models = _models(second=second)
    with ScriptedServer(models) as server:
        path = _team(tmp_path, server)
        inputs = write_inputs(tmp_path / "in.jsonl", ["a", "b", "c"])
        args = ["batch", str(path), str(inputs), "-o", "out.jsonl", "--var", "tone=t", "--json"]
        assert cli(*args).returncode == 1
        assert [line["status"] for line in read_out(tmp_path / "out.jsonl")] == ["ok", "error", "ok"]
        broken.clear()
        models.calls.clear()
        again = cli(*args)
    assert again.returncode == 0, again.stderr
    assert models.calls == {"first": 1, "second": 1}
    lines = read_out(tmp_path / "out.jsonl")
    assert [(line["id"], line["status"]) for line in lines] == [(1, "ok"), (2, "ok"), (3, "ok")]
    assert json.loads(again.stdout)["skipped"] == 2 and "2 items done before are kept" in again.stderr


def test_concurrency_is_the_number_of_workflows_at_once(cli: Cli, tmp_path: Path) -> None:
    models = _models()
    models.delay_s = 0.1
    with ScriptedServer(models) as server:
        path = _team(tmp_path, server)
        inputs = write_inputs(tmp_path / "in.jsonl", [f"n{n}" for n in range(6)])
        done = cli("batch", str(path), str(inputs), "-o", "out.jsonl", "-c", "2", "--var", "tone=t")
    assert done.returncode == 0, done.stderr
    assert models.most_in_flight == 2  # each workflow runs one step at a time


def test_agent_runs_that_team_agent_per_input_instead_of_the_workflow(cli: Cli, tmp_path: Path) -> None:
    models = _models()
    with ScriptedServer(models) as server:
        path = _team(tmp_path, server)
        inputs = write_inputs(tmp_path / "in.jsonl", ["a", "b"])
        done = cli("batch", str(path), str(inputs), "-o", "out.jsonl", "--agent", "second")
    assert done.returncode == 0, done.stderr
    assert [line["answer"] for line in read_out(tmp_path / "out.jsonl")] == ["S(a)", "S(b)"]
    assert models.calls == {"second": 2}
    assert not any("workflow" in read_transcript(p).header for p in cli.transcripts())


def test_bad_agent_options_are_refused_before_anything_runs(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text('"x"\n', encoding="utf-8")
    path = team(tmp_path, "http://127.0.0.1:9/v1", {"first": "", "second": ""}, TWO_STEPS)
    unknown = cli("batch", str(path), "in.jsonl", "-o", "out.jsonl", "--agent", "secnd")
    assert unknown.returncode == 2
    assert "no agent named 'secnd' in this file (did you mean 'second'?)" in unknown.stderr
    assert "agents here: first, second" in unknown.stderr
    single = make_agent(tmp_path / "single", "http://127.0.0.1:9/v1")
    lone = cli("batch", str(single), "in.jsonl", "-o", "out.jsonl", "--agent", "adder")
    assert lone.returncode == 2 and "--agent adder:" in lone.stderr
    assert "is not a team file (it is one agent)" in lone.stderr and "drop --agent" in lone.stderr
    ray = cli("batch", str(path), "in.jsonl", "-o", "out.jsonl", "--backend", "ray")
    assert ray.returncode == 2
    assert "has a workflow: a batch of workflows runs on the local backend, not on Ray" in ray.stderr
    assert "--agent NAME" in ray.stderr
    for result in (unknown, lone, ray):
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "out.jsonl").exists() and not cli.transcripts()


def test_ctrl_c_interrupts_the_running_workflows_writes_none_of_them_and_a_rerun_completes(
    cli: Cli, tmp_path: Path
) -> None:
    models = _models()
    models.delay_s = 0.3
    items = [f"item {n}" for n in range(10)]
    out = tmp_path / "out.jsonl"
    with ScriptedServer(models) as server:
        path = _team(tmp_path, server)
        inputs = write_inputs(tmp_path / "in.jsonl", items)
        args = ["batch", str(path), str(inputs), "-o", str(out), "-c", "3", "--var", "tone=t"]
        process = cli.popen(*args)
        _wait_for_lines(out, 1)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
        assert process.returncode == 130, stderr
        assert "batch interrupted" in stderr and "Traceback" not in stderr
        done = read_out(out)
        assert 1 <= len(done) < 10 and {line["status"] for line in done} == {"ok"}
        written = {line["session_id"] for line in done}
        workflows = [p for p in cli.transcripts() if "workflow" in read_transcript(p).header]
        stopped = [p for p in workflows if p.stem not in written]
        assert stopped  # the workflows that were running: transcripts whole, ended "interrupted"
        for record in stopped:
            assert events(record, "workflow_end")[-1]["status"] == "interrupted"
        again = cli(*args)
    assert again.returncode == 0, again.stderr
    lines = read_out(out)
    assert [line["answer"] for line in lines] == [f"S(two F(one {item}) t)" for item in items]


def test_a_workflow_that_validate_refuses_never_starts(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text('"x"\n', encoding="utf-8")
    broken = TWO_STEPS.replace("steps.one.output", "steps.on.output")
    path = team(tmp_path, "http://127.0.0.1:9/v1", {"first": "", "second": ""}, broken)
    result = cli("batch", str(path), "in.jsonl", "-o", "out.jsonl")
    assert (
        result.returncode == 2 and "no step 'on'" in result.stderr and "did you mean 'one'" in result.stderr
    )
    assert not (tmp_path / "out.jsonl").exists() and not cli.transcripts()


def test_every_team_agents_secrets_are_masked_in_the_lines(cli: Cli, tmp_path: Path) -> None:
    secret = "sk-team-second-0123456789"
    models = _models(second=lambda body: f"the key is {secret}")
    with ScriptedServer(models) as server:
        path = tmp_path / "team.yaml"
        path.write_text(
            "version: 1\nagents:\n"
            f"  first:\n    model: {{id: openai/first, api_base: '{server.base_url}', retries: 0}}\n"
            f"  second:\n    model: {{id: openai/second, api_base: '{server.base_url}', retries: 0,"
            " api_key: '${SECOND_API_KEY}'}\n" + TWO_STEPS.replace(" {{ vars.tone }}", ""),
            encoding="utf-8",
        )
        inputs = write_inputs(tmp_path / "in.jsonl", ["a"])
        done = cli("batch", str(path), str(inputs), "-o", "out.jsonl", extra_env={"SECOND_API_KEY": secret})
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    assert secret not in text and read_out(tmp_path / "out.jsonl")[0]["answer"] == "the key is ***"
    assert not any(secret in p.read_text(encoding="utf-8") for p in cli.transcripts())


def test_max_cost_usd_counts_every_step_of_every_item_and_starts_no_new_workflow(
    cli: Cli, tmp_path: Path
) -> None:
    # models with a price in litellm's bundled map: each step's call has a cost
    models = Models({"gpt-4o-mini": lambda body: "mini", "gpt-4o": lambda body: "big"})
    with ScriptedServer(models) as server:
        path = tmp_path / "team.yaml"
        path.write_text(
            "version: 1\nagents:\n"
            f"  first:\n    model: {{id: openai/gpt-4o-mini, api_base: '{server.base_url}', retries: 0}}\n"
            f"  second:\n    model: {{id: openai/gpt-4o, api_base: '{server.base_url}', retries: 0}}\n"
            + TWO_STEPS.replace(" {{ vars.tone }}", ""),
            encoding="utf-8",
        )
        one = write_inputs(tmp_path / "one.jsonl", ["first"])
        assert cli("batch", str(path), str(one), "-o", "measured.jsonl").returncode == 0
        (line,) = read_out(tmp_path / "measured.jsonl")
        cost = line["cost_usd"]
        assert cost and line["usage"]["cost_usd"] == cost  # both steps' costs, summed
        models.calls.clear()
        inputs = write_inputs(tmp_path / "in.jsonl", [f"n{n}" for n in range(5)])
        budget = f"{cost * 1.5:.10f}"  # the second workflow starts under it, a third would not
        done = cli("batch", str(path), str(inputs), "-o", "out.jsonl", "-c", "1", "--max-cost-usd", budget)
    assert done.returncode == 3, done.stderr
    assert [line["id"] for line in read_out(tmp_path / "out.jsonl")] == [1, 2]
    assert models.calls == {"gpt-4o-mini": 2, "gpt-4o": 2}
    assert "batch stopped: its budget was spent (--max-cost-usd " in done.stderr
    assert "3 items not started" in done.stderr
