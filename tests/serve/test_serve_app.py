"""``runner serve`` over HTTP with the real openai SDK: models, streamed and whole answers, history."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from runner.store.transcript import read_transcript, sessions_dir

ADD_TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

ADD_THEN_ANSWER = [
    {"content": 'Adding <now> & "then"', "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
    {"content": "2 + 3 = 5."},
]


@pytest.fixture
def calc(scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]) -> Any:
    """A served agent `calc` with an `add` tool; ``calc.server`` is its scripted model."""
    server = scripted(ADD_THEN_ANSWER, repeat=True)
    agent_files.write("calc", server, "prompts:\n  system: You add numbers.", tools=ADD_TOOLS)
    served = serve_app([agent_files.root])
    served.server_model = server
    return served


def test_models_lists_every_agent_and_team_member_and_skips_invalid_files(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([])
    agent_files.write("solo", server, "description: Works alone.")
    nested = agent_files.root / "nested"
    nested.mkdir()
    (nested / "team.yaml").write_text(
        textwrap.dedent(
            f"""\
            version: 1
            agents:
              lead:
                model: {{id: openai/scripted, api_base: "{server.base_url}", api_key: "${{K:-sk}}"}}
              helper:
                model: {{id: openai/scripted, api_base: "{server.base_url}", api_key: "${{K:-sk}}"}}
            """
        ),
        encoding="utf-8",
    )
    (agent_files.root / "broken.yaml").write_text("version: 1\nname: broken\nmodel: 3\n", encoding="utf-8")
    served = serve_app([agent_files.root])
    assert any("broken.yaml" in line for line in served.holder.current.problems())
    client = served.openai()
    models = {m.id: m for m in client.models.list()}
    assert sorted(models) == ["helper", "lead", "solo"]
    assert models["solo"].owned_by == "runner"
    assert client.models.retrieve("lead").id == "lead"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("broken")
    with served.http() as http:
        assert http.get("/health").json() == {"status": "ok", "models": 3}


def test_stream_renders_tools_as_details_blocks_and_ends_once(calc: Any, check_stream: Any) -> None:
    client = calc.openai()
    stream = client.chat.completions.create(
        model="calc", messages=[{"role": "user", "content": "2+3?"}], stream=True
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert all(c.choices[0].delta.tool_calls is None for c in chunks)
    (raw,) = calc.recorder.streams()
    assert len(check_stream(raw.body).blocks) == 1
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content.startswith('Adding <now> & "then"\n<details type="tool_calls" done="true" id="call_')
    assert (
        'name="add" arguments="{&quot;a&quot;: 2, &quot;b&quot;: 3}">\n<summary>Tool Executed</summary>\n'
        in content
    )
    assert "\n&quot;5&quot;\n</details>\n2 + 3 = 5." in content


async def test_async_stream_with_usage_and_whole_answer_carry_the_same_content(calc: Any) -> None:
    client = calc.async_openai()
    stream = await client.chat.completions.create(
        model="calc",
        messages=[{"role": "user", "content": "2+3?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens > 0
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    whole = await client.chat.completions.create(model="calc", messages=[{"role": "user", "content": "2+3?"}])
    assert whole.object == "chat.completion"
    assert whole.choices[0].finish_reason == "stop"
    assert whole.usage is not None and whole.usage.total_tokens > 0
    assert _without_ids(whole.choices[0].message.content or "") == _without_ids(streamed)
    await client.close()


def _without_ids(content: str) -> str:
    import re

    return re.sub(r'id="call_\d+"', 'id="?"', content)


def test_sync_whole_answer(calc: Any) -> None:
    answer = calc.openai().chat.completions.create(
        model="calc", messages=[{"role": "user", "content": "2+3?"}]
    )
    content = answer.choices[0].message.content or ""
    assert content.endswith("</details>\n2 + 3 = 5.")
    assert answer.choices[0].message.tool_calls is None


def test_earlier_details_blocks_become_real_tool_calls_and_results(calc: Any) -> None:
    client = calc.openai()
    first = client.chat.completions.create(model="calc", messages=[{"role": "user", "content": "2+3?"}])
    previous = first.choices[0].message.content or ""
    client.chat.completions.create(
        model="calc",
        messages=[
            {"role": "system", "content": "Answer in English."},
            {"role": "user", "content": "2+3?"},
            {"role": "assistant", "content": previous},
            {"role": "user", "content": "And again?"},
        ],
    )
    sent = calc.server_model.requests[-2]["messages"]  # the first step of the second answer
    assert [m["role"] for m in sent] == ["system", "system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[0]["content"] == "You add numbers." and sent[1]["content"] == "Answer in English."
    call = sent[3]["tool_calls"][0]
    assert sent[3]["content"] == 'Adding <now> & "then"'
    assert call["function"] == {"name": "add", "arguments": '{"a": 2, "b": 3}'}
    assert sent[4] == {"role": "tool", "tool_call_id": call["id"], "content": "5"}
    assert sent[5] == {"role": "assistant", "content": "2 + 3 = 5."}
    assert sent[6]["content"] == "And again?"


def test_each_request_writes_a_transcript_of_the_whole_conversation(calc: Any, home: Path) -> None:
    calc.openai().chat.completions.create(
        model="calc",
        messages=[
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "2+3?"},
        ],
    )
    (path,) = sessions_dir(home).glob("*.jsonl")
    transcript = read_transcript(path)
    assert transcript.header["agent"] == "calc"
    roles = [m["role"] for m in transcript.messages()]
    assert roles == ["system", "user", "assistant", "user", "assistant", "tool", "assistant"]


def test_request_parameters_only_lower_the_agents(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if body["messages"][-1]["role"] == "user":
            return {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 1}}]}
        return {"content": "done"}

    server = scripted(reply)
    agent_files.write(
        "capped", server, "limits:\n  max_steps: 2", tools=ADD_TOOLS, model="temperature: 0.2\nmax_tokens: 50"
    )
    client = serve_app([agent_files.root]).openai()
    client.chat.completions.create(
        model="capped", messages=[{"role": "user", "content": "hi"}], temperature=1.5, max_tokens=500
    )
    assert server.requests[-1]["temperature"] == 0.2 and server.requests[-1]["max_tokens"] == 50
    client.chat.completions.create(
        model="capped", messages=[{"role": "user", "content": "hi"}], temperature=0.1, max_tokens=7
    )
    assert server.requests[-1]["temperature"] == 0.1 and server.requests[-1]["max_tokens"] == 7
    before = len(server.requests)
    answer = client.chat.completions.create(
        model="capped", messages=[{"role": "user", "content": "hi"}], extra_body={"limits": {"max_steps": 1}}
    )
    assert len(server.requests) == before + 1
    assert "limits.max_steps (1 step)" in (answer.choices[0].message.content or "")
    before = len(server.requests)
    client.chat.completions.create(
        model="capped", messages=[{"role": "user", "content": "hi"}], extra_body={"limits": {"max_steps": 99}}
    )
    assert len(server.requests) == before + 2  # the agent's max_steps (2) still holds


def test_client_system_message_comes_after_the_agents_prompt(calc: Any) -> None:
    calc.openai().chat.completions.create(
        model="calc",
        messages=[{"role": "developer", "content": "Be terse."}, {"role": "user", "content": "2+3?"}],
    )
    first = calc.server_model.requests[-2]["messages"]
    assert first[:3] == [
        {"role": "system", "content": "You add numbers."},
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "2+3?"},
    ]
    assert json.dumps(first[0]) == json.dumps(calc.server_model.requests[-1]["messages"][0])


def test_every_request_of_a_conversation_sends_the_same_system_prompt(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted([{"content": "one"}, {"content": "two"}])
    agent_files.write("echo", server, "prompts:\n  system: 'The topic is {{ input }}.'")
    client = serve_app([agent_files.root]).openai()
    client.chat.completions.create(model="echo", messages=[{"role": "user", "content": "tides"}])
    client.chat.completions.create(
        model="echo",
        messages=[
            {"role": "user", "content": "tides"},
            {"role": "assistant", "content": "one"},
            {"role": "user", "content": "and waves?"},
        ],
    )
    first, second = (r["messages"] for r in server.requests)
    assert first[0] == second[0] == {"role": "system", "content": "The topic is tides."}
    assert second[1:] == [
        *first[1:],
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": "and waves?"},
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_each_request_gets_one_access_line(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], stream: bool
) -> None:
    server = scripted(ADD_THEN_ANSWER, repeat=True)
    agent_files.write("calc", server, "prompts:\n  system: You add numbers.", tools=ADD_TOOLS)
    lines: list[str] = []
    served = serve_app([agent_files.root], report=lines.append)
    client = served.openai()
    messages = [{"role": "user", "content": "2+3?"}]
    if stream:
        list(client.chat.completions.create(model="calc", messages=messages, stream=True))
    else:
        client.chat.completions.create(model="calc", messages=messages)
    (line,) = [line for line in lines if line.startswith("request:")]
    assert line.startswith("request: calc 200 ") and " tokens stop session " in line
    prompt, completion = line.split(" s ")[1].split()[0].split("+")
    assert int(prompt) > 0 and int(completion) > 0


@pytest.mark.parametrize("stream", [False, True])
def test_plain_answers_have_no_details_blocks(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any], stream: bool
) -> None:
    server = scripted(ADD_THEN_ANSWER, repeat=True)
    agent_files.write("calc", server, "prompts:\n  system: You add numbers.", tools=ADD_TOOLS)
    client = serve_app([agent_files.root], tool_details=False).openai()
    messages = [{"role": "user", "content": "2+3?"}]
    if stream:
        chunks = client.chat.completions.create(model="calc", messages=messages, stream=True)
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        content = client.chat.completions.create(model="calc", messages=messages).choices[0].message.content
    assert "<details" not in content and "2 + 3 = 5." in content
    assert len(server.requests) == 2  # the tool still ran


def test_an_agent_can_ask_for_plain_answers_itself(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted(ADD_THEN_ANSWER, repeat=True)
    body = "prompts:\n  system: You add numbers.\nserve:\n  tool_details: false"
    agent_files.write("calc", server, body, tools=ADD_TOOLS)
    client = serve_app([agent_files.root]).openai()
    answer = client.chat.completions.create(model="calc", messages=[{"role": "user", "content": "2+3?"}])
    content = answer.choices[0].message.content
    assert "<details" not in content and "2 + 3 = 5." in content
