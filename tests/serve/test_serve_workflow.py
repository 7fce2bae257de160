"""``runner serve`` serves a team file's workflow as a model: listed, run once per request (issue 17).

Driven through the real ``openai`` SDK against the app on uvicorn; every response is checked
against the chunk and error rules by the ``recorder`` fixture (``conftest.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from runner.serve.catalog import load_catalog
from runner.testing import ScriptedServer
from tests.workflow.helpers import Models, events, team, user_text

PLANNER = """output:
  type: object
  required: [tasks]
  properties:
    tasks: {type: array, items: {type: string}}
"""

PLAN_WORKFLOW = """workflow:
  name: research
  output: "{{ steps.research.output | join(' | ') }}"
  steps:
    - id: plan
      agent: planner
      input: "plan: {{ input }}"
    - id: research
      for_each: steps.plan.output.tasks
      as: task
      step:
        id: one
        agent: researcher
        input: "research {{ task }}"
"""

OBJECT_WORKFLOW = """workflow:
  name: report
  output_schema:
    type: object
    required: [topic, findings]
    properties:
      topic: {type: string}
      findings: {type: array, items: {type: string}}
  output: '{"topic": {{ input | tojson }}, "findings": {{ steps.research.output | tojson }}}'
  steps:
    - id: plan
      agent: planner
    - id: research
      for_each: steps.plan.output.tasks
      as: task
      step: {id: one, agent: researcher, input: "{{ task }}"}
"""


def stream_error(raw: httpx.Response) -> dict[str, Any]:
    """The error a stream ended with: chunks without a finish, OpenAI's error event, ``[DONE]``."""
    assert raw.status_code == 200
    datas = [line[len("data: ") :] for line in raw.text.split("\n\n") if line.startswith("data: ")]
    assert datas[-1] == "[DONE]"
    error = json.loads(datas[-2])
    assert set(error) == {"error"} and set(error["error"]) == {"message", "type", "param", "code"}
    chunks = [json.loads(d) for d in datas[:-2]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)  # no finish: it failed
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == ""
    return dict(error["error"])


def _models() -> Models:
    return Models(
        {
            "planner": lambda body: {"tasks": ["a", "b", "c"]},
            "researcher": lambda body: user_text(body).upper(),
        }
    )


@pytest.fixture
def research(
    scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any]
) -> tuple[Any, Models, list[str]]:
    models = _models()
    server = scripted(models)
    team(agent_files.root, server.base_url, {"planner": PLANNER, "researcher": ""}, PLAN_WORKFLOW)
    lines: list[str] = []
    return serve_app([agent_files.root], report=lines.append), models, lines


def test_the_models_list_shows_the_workflow_beside_its_member_agents(
    research: tuple[Any, Models, list[str]],
) -> None:
    served, _, _ = research
    client = served.openai()
    cards = {model.id: model for model in client.models.list()}
    assert set(cards) == {"planner", "researcher", "research"}
    card = client.models.retrieve("research")
    assert card.id == "research" and card.owned_by == "runner"
    description = card.model_extra["description"]
    assert description == "a workflow of 2 steps (plan, research) running agents planner, researcher"
    with served.http() as http:
        assert http.get("/health").json() == {"status": "ok", "models": 3}


def test_a_whole_completion_answers_with_the_output_and_writes_a_transcript_linking_each_step(
    research: tuple[Any, Models, list[str]], home: Path
) -> None:
    served, models, lines = research
    answer = served.openai().chat.completions.create(
        model="research",
        messages=[
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "an older question"},
            {"role": "assistant", "content": "an older answer"},
            {"role": "user", "content": "the moon"},
        ],
    )
    message = answer.choices[0].message
    assert message.content == "RESEARCH A | RESEARCH B | RESEARCH C"
    assert answer.choices[0].finish_reason == "stop"
    assert models.calls == {"planner": 1, "researcher": 3}
    assert answer.usage is not None and answer.usage.total_tokens == 4 * 20
    reasoning = message.model_extra["reasoning_content"]
    assert "[plan] started (agent planner)\n" in reasoning
    assert "[research[2]/one] ok in " in reasoning and "[research] ok in " in reasoning
    # the workflow's input is the last user message only (earlier messages are not given to it)
    (record,) = [
        p for p in (home / "sessions").glob("*.jsonl") if '"workflow"' in p.read_text().split("\n")[0]
    ]
    header = json.loads(record.read_text().split("\n")[0])
    assert header["workflow"] == "research" and header["input"] == "the moon"
    starts = {e["key"]: e for e in events(record, "step_start")}
    assert starts["plan"]["input"] == "plan: the moon"
    ends = {e["key"]: e for e in events(record, "step_end")}
    children = [
        ends[key]["session_id"] for key in ("plan", "research[0]/one", "research[1]/one", "research[2]/one")
    ]
    for child in children:
        assert (home / "sessions" / f"{child}.jsonl").is_file()
    assert len(list((home / "sessions").glob("*.jsonl"))) == 1 + 4
    (end,) = events(record, "workflow_end")
    assert end["exit_code"] == 0 and end["output"] == message.content
    (line,) = [line for line in lines if line.startswith("request: research")]
    assert line.startswith("request: research 200 ") and line.endswith(f"stop workflow session {record.stem}")


def test_a_streamed_completion_shows_the_steps_as_reasoning_then_the_output(
    research: tuple[Any, Models, list[str]], check_stream: Callable[..., Any]
) -> None:
    served, _, _ = research
    with served.http() as http:
        body = {
            "model": "research",
            "messages": [{"role": "user", "content": "mars"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        raw = http.post("/v1/chat/completions", json=body).content
    result = check_stream(raw)
    assert result.content == "RESEARCH A | RESEARCH B | RESEARCH C"
    assert result.finish_reason == "stop" and result.usage["total_tokens"] == 80
    reasoning = [c["choices"][0]["delta"].get("reasoning_content") for c in result.chunks if c["choices"]]
    steps = "".join(r for r in reasoning if r)
    assert steps.index("[plan] started") < steps.index("[plan] ok") < steps.index("[research] ok")
    first_content = next(
        i for i, c in enumerate(result.chunks) if c["choices"] and c["choices"][0]["delta"].get("content")
    )
    last_reasoning = max(i for i, r in enumerate(reasoning) if r)
    assert last_reasoning < first_content  # progress first, the answer after
    # through the SDK too
    stream = served.openai().chat.completions.create(
        model="research", messages=[{"role": "user", "content": "mars"}], stream=True
    )
    assert (
        "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices) == result.content
    )


def test_an_object_output_is_json_text_that_parses_whole_and_streamed(
    scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted(_models())
    team(agent_files.root, server.base_url, {"planner": PLANNER, "researcher": ""}, OBJECT_WORKFLOW)
    client = serve_app([agent_files.root]).openai()
    expected = {"topic": "tides", "findings": ["A", "B", "C"]}
    whole = client.chat.completions.create(model="report", messages=[{"role": "user", "content": "tides"}])
    assert json.loads(whole.choices[0].message.content or "") == expected
    stream = client.chat.completions.create(
        model="report", messages=[{"role": "user", "content": "tides"}], stream=True
    )
    assert json.loads("".join(c.choices[0].delta.content or "" for c in stream if c.choices)) == expected
    # the SDK's parse() with the same schema reads it
    schema = {
        "type": "object",
        "required": ["topic", "findings"],
        "properties": {
            "topic": {"type": "string"},
            "findings": {"type": "array", "items": {"type": "string"}},
        },
    }
    parsed = client.chat.completions.create(
        model="report",
        messages=[{"role": "user", "content": "tides"}],
        response_format={"type": "json_schema", "json_schema": {"name": "report", "schema": schema}},
    )
    assert json.loads(parsed.choices[0].message.content or "") == expected


FAILING = """version: 1
agents:
  first:
    model: {{id: openai/first, api_base: '{base}', api_key: '${{WF_SECRET_KEY}}', retries: 0}}
  broken:
    model: {{id: openai/broken, api_base: '{base}', api_key: '${{WF_SECRET_KEY}}', retries: 0}}
  never:
    model: {{id: openai/never, api_base: '{base}', retries: 0}}
workflow:
  name: fragile
  steps:
    - {{id: warmup, agent: first}}
    - {{id: crash, agent: broken}}
    - {{id: after, agent: never}}
"""


def test_a_failing_step_is_a_502_workflow_failed_naming_the_step_without_secrets_or_urls(
    scripted: Callable[..., ScriptedServer],
    agent_files: Any,
    serve_app: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    home: Path,
) -> None:
    secret = "sk-very-secret-0123456789"
    monkeypatch.setenv("WF_SECRET_KEY", secret)

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        if body["model"] == "broken":
            return {"status": 400, "error": f"key {secret} refused by http://10.1.2.3:9000/v1/internal"}
        return {"content": "warm"}

    server = scripted(answer)
    (agent_files.root / "team.yaml").write_text(FAILING.format(base=server.base_url), encoding="utf-8")
    served = serve_app([agent_files.root])
    client = served.openai()
    with pytest.raises(openai.APIStatusError) as failed:
        client.chat.completions.create(model="fragile", messages=[{"role": "user", "content": "go"}])
    assert failed.value.status_code == 502
    error = failed.value.body
    assert isinstance(error, dict) and error["code"] == "workflow_failed" and error["type"] == "server_error"
    message = error["message"]
    assert message.startswith("workflow fragile failed: step crash failed: ")
    assert "refused by" in message
    assert secret not in message and "10.1.2.3" not in message and "http://" not in message
    assert [r["model"] for r in server.requests] == ["first", "broken"]  # 'after' never started
    # streamed: an error event, then [DONE] (the SDK raises it). Not through the recorder: its
    # chunk rules do not know error events.
    body = {"model": "fragile", "messages": [{"role": "user", "content": "go"}], "stream": True}
    with httpx.Client(base_url=served.url, timeout=30) as http:
        raw = http.post("/v1/chat/completions", json=body)
        sdk = openai.OpenAI(base_url=served.base_url, api_key="k", http_client=http, max_retries=0)
        with pytest.raises(openai.APIError) as streamed:
            list(sdk.chat.completions.create(model="fragile", messages=body["messages"], stream=True))
    assert "step crash failed" in streamed.value.message and secret not in streamed.value.message
    error = stream_error(raw)
    assert error["code"] == "workflow_failed" and "step crash failed" in error["message"]
    # the workflow transcripts record the failure (resumable as with runner run)
    ends = [e for p in (home / "sessions").glob("*.jsonl") for e in events(p, "workflow_end")]
    assert len(ends) == 3 and all(e["exit_code"] == 1 for e in ends)


LOOP = """workflow:
  name: review
  steps:
    - id: review
      loop:
        max_iterations: 3
        until: steps.critic.output.approved
        steps:
          - id: critic
            agent: critic
            input: "draft {{ iteration }}"
"""

LOOP_WITH_OUTPUT = LOOP.replace(
    "  name: review\n", '  name: review\n  output: "last verdict: {{ steps.critic.output.approved }}"\n'
)

CRITIC = """output:
  type: object
  required: [approved]
  properties: {approved: {type: boolean}}
"""


def test_a_loop_that_hits_max_iterations_answers_its_output_with_the_note(
    scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    models = Models({"critic": lambda body: {"approved": False}})
    server = scripted(models)
    team(agent_files.root, server.base_url, {"critic": CRITIC}, LOOP_WITH_OUTPUT)
    client = serve_app([agent_files.root]).openai()
    answer = client.chat.completions.create(model="review", messages=[{"role": "user", "content": "x"}])
    content = answer.choices[0].message.content or ""
    assert content.startswith("last verdict: False\n\n> ")
    assert "loop review stopped at max_iterations (3) before its until held" in content
    assert models.calls == {"critic": 3}


def test_a_loop_whose_output_is_json_keeps_the_note_out_of_the_answer(
    scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted(Models({"critic": lambda body: {"approved": False}}))
    team(agent_files.root, server.base_url, {"critic": CRITIC}, LOOP)
    client = serve_app([agent_files.root]).openai()
    answer = client.chat.completions.create(model="review", messages=[{"role": "user", "content": "x"}])
    message = answer.choices[0].message
    assert json.loads(message.content or "") == {"approved": False}  # the loop's last output, as JSON
    assert "note: loop review stopped at max_iterations (3)" in message.model_extra["reasoning_content"]


def test_a_limit_before_any_output_is_a_502_workflow_limit(
    research: tuple[Any, Models, list[str]],
) -> None:
    served, models, _ = research
    client = served.openai()
    with pytest.raises(openai.APIStatusError) as stopped:
        # max_tokens lowers the workflow's shared token budget: the plan step spends it
        client.chat.completions.create(
            model="research", messages=[{"role": "user", "content": "x"}], max_tokens=15
        )
    assert stopped.value.status_code == 502
    error = stopped.value.body
    assert isinstance(error, dict) and error["code"] == "workflow_limit"
    assert "stopped at a limit before it had an output" in error["message"]
    assert "limits.max_tokens" in error["message"] and "the request's max_tokens" in error["message"]
    assert models.calls.get("researcher", 0) == 0


def test_the_catalog_serves_the_first_of_two_models_with_one_name_and_warns_once(
    tmp_path: Path, scripted: Callable[..., ScriptedServer]
) -> None:
    server = scripted(_models())
    first = tmp_path / "a"
    first.mkdir()
    (first / "research.yaml").write_text(
        f"version: 1\nname: research\nmodel: {{id: openai/x, api_base: '{server.base_url}'}}\n",
        encoding="utf-8",
    )
    second = tmp_path / "b"
    second.mkdir()
    team(second, server.base_url, {"planner": PLANNER, "researcher": ""}, PLAN_WORKFLOW)
    catalog = load_catalog([first, second])
    assert set(catalog.agents) == {"research", "planner", "researcher"} and catalog.workflows == {}
    (warning,) = catalog.warnings
    assert warning == (
        f"{second / 'team.yaml'}: workflow 'research' is already served from {first / 'research.yaml'} "
        "(as an agent); skipped"
    )
    # a workflow without a name: the file's stem
    unnamed = tmp_path / "c"
    unnamed.mkdir()
    team(unnamed, server.base_url, {"critic": CRITIC}, LOOP.replace("  name: review\n", ""))
    assert list(load_catalog([unnamed]).workflows) == ["team"]


def test_a_served_run_that_failed_resumes_with_runner_resume(
    scripted: Callable[..., ScriptedServer],
    agent_files: Any,
    serve_app: Callable[..., Any],
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WF_SECRET_KEY", "sk-test")
    broken = {"count": 0}

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        if body["model"] == "broken":
            broken["count"] += 1
            if broken["count"] == 1:
                return {"status": 400, "error": "not yet"}
        return {"content": f"{body['model']} done"}

    server = scripted(answer)
    (agent_files.root / "team.yaml").write_text(FAILING.format(base=server.base_url), encoding="utf-8")
    with pytest.raises(openai.APIStatusError) as failed:
        serve_app([agent_files.root]).openai().chat.completions.create(
            model="fragile", messages=[{"role": "user", "content": "go"}]
        )
    assert failed.value.status_code == 502, failed.value.body
    (record,) = [
        p for p in (home / "sessions").glob("*.jsonl") if '"workflow"' in p.read_text().split("\n")[0]
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNNER_", "OPENAI_"))}
    env.update(RUNNER_HOME=str(home), RUNNER_FAST_PATH="1", NO_COLOR="1")
    done = subprocess.run(
        [str(Path(sys.executable).parent / "runner"), "resume", record.stem],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "never done"
    assert "[warmup] done earlier (recorded output reused)" in done.stderr
    assert [r["model"] for r in server.requests] == ["first", "broken", "broken", "never"]


def test_an_agent_whose_tools_cannot_open_is_a_failed_step_naming_why_and_the_server_goes_on(
    scripted: Callable[..., ScriptedServer], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    models = _models()
    server = scripted(models)
    fake = Path(__file__).resolve().parent.parent / "tools_mcp" / "fake_mcp_server.py"
    researcher = f"tools:\n  - mcp: {{command: {sys.executable}, args: [{fake}, --exit-now]}}\n    id: down\n"
    workflow = PLAN_WORKFLOW.replace(
        "    - id: research\n      for_each",
        "    - id: top\n      agent: researcher\n    - id: research\n      for_each",
    )
    team(agent_files.root, server.base_url, {"planner": PLANNER, "researcher": researcher}, workflow)
    client = serve_app([agent_files.root]).openai()
    with pytest.raises(openai.APIStatusError) as failed:
        client.chat.completions.create(model="research", messages=[{"role": "user", "content": "x"}])
    assert failed.value.status_code == 502
    error = failed.value.body
    assert isinstance(error, dict) and error["code"] == "workflow_failed"
    assert error["message"].startswith(
        "workflow research failed: step top failed: agent researcher could not start"
    )
    assert "down" in error["message"] and "Traceback" not in error["message"]
    assert models.calls == {"planner": 1}  # the plan ran; the research step could not open
    answer = client.chat.completions.create(model="planner", messages=[{"role": "user", "content": "x"}])
    assert json.loads(answer.choices[0].message.content or "") == {"tasks": ["a", "b", "c"]}
