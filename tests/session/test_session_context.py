"""Request layout and context budget (SPEC section 7): a byte-identical prefix, an append-only history,
the status message last and never stored, old tool outputs compressed to placeholders."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

from runner.models.base import Reply, Request
from runner.testing import text, tool_call

TOOLS = """
def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b


def big(n: int) -> str:
    \"\"\"A long output.\"\"\"
    return f"line one of {n}\\n" + "y" * 600


def documented() -> str:
    \"\"\"A tool with a long description:
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum
    \"\"\"
    return "ok"


def broken() -> str:
    \"\"\"A long error.\"\"\"
    raise ValueError("E" * 600)
"""

LAYOUT = """
prompts:
  system: "You add numbers for {{ agent }}."
  status: "STATUS-MARKER input={{ input }}"
limits:
  max_steps: 60
"""


class Snapshots:
    """Script steps that record each request as JSON text at the moment it is sent."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def step(self, reply: Reply) -> Callable[[Request], Reply]:
        def answer(request: Request) -> Reply:
            self.sent.append(
                {
                    "system": json.dumps(request.messages[0]),
                    "tools": json.dumps(request.tools),
                    "messages": [json.dumps(m, sort_keys=True) for m in request.messages],
                    "last": request.messages[-1],
                }
            )
            return reply

        return answer


async def fifty_steps(agent, drive):
    spec = agent(LAYOUT, tools=TOOLS)
    snapshots = Snapshots()
    script = [snapshots.step(tool_call("add", a=i, b=1)) for i in range(49)]
    script.append(snapshots.step(text("done")))
    run = await drive(spec, script, "add many")
    assert run.result.reason == "done" and run.result.steps == 50
    return run, snapshots.sent


async def test_system_message_and_tools_are_byte_identical_across_all_requests(agent, drive):
    _, sent = await fifty_steps(agent, drive)
    assert len(sent) == 50
    assert json.loads(sent[0]["system"]) == {"role": "system", "content": "You add numbers for tester."}
    assert json.loads(sent[0]["tools"])[0]["function"]["name"] == "add"
    assert {s["system"] for s in sent} == {sent[0]["system"]}
    assert {s["tools"] for s in sent} == {sent[0]["tools"]}


async def test_history_only_grows_by_appending(agent, drive):
    _, sent = await fifty_steps(agent, drive)
    for earlier, later in itertools.pairwise(sent):
        before = earlier["messages"][:-1]  # without the status message
        assert later["messages"][: len(before)] == before
        assert len(later["messages"]) > len(earlier["messages"])


async def test_status_is_sent_last_and_never_stored(agent, drive):
    run, sent = await fifty_steps(agent, drive)
    status = {"role": "user", "content": "STATUS-MARKER input=add many"}
    assert all(s["last"] == status for s in sent)
    assert all(sum("STATUS-MARKER" in m for m in s["messages"]) == 1 for s in sent)
    assert not any("STATUS-MARKER" in str(m.get("content")) for m in run.history)
    assert "STATUS-MARKER" not in run.transcript_path.read_text(encoding="utf-8")


async def test_old_tool_outputs_are_compressed_to_placeholders(agent, drive, assert_valid_history):
    spec = agent("prompts:\n  system: Be brief.\nlimits:\n  context_tokens: 300\n", tools=TOOLS)
    script = [tool_call("broken")] + [tool_call("big", n=n) for n in range(1, 5)] + [text("done")]
    run = await drive(spec, script, "fill the context")
    assert run.result.reason == "done"
    last = run.requests[-1].messages
    assert last[0] == {"role": "system", "content": "Be brief."}
    assert last[1] == {"role": "user", "content": "fill the context"}
    tools = [m["content"] for m in last if m["role"] == "tool"]
    assert tools[0] == "ValueError: " + "E" * 600  # an error stays
    assert tools[1] == "[output of big compressed: 614 chars; first line: line one of 1]"
    assert tools[2] == "[output of big compressed: 614 chars; first line: line one of 2]"
    assert tools[3].startswith("line one of 3\n") and len(tools[3]) == 614  # the last two steps stay
    assert tools[4].startswith("line one of 4\n") and len(tools[4]) == 614
    assistants = [m for m in last if m["role"] == "assistant"]
    assert [m["tool_calls"][0]["function"]["name"] for m in assistants] == ["broken"] + ["big"] * 4
    assert_valid_history(last[1:])
    events = run.transcript_events("compress")
    assert [r["name"] for e in events for r in e["data"]["replaced"]] == ["big", "big"]
    assert all(r["chars"] == 614 for e in events for r in e["data"]["replaced"])


async def test_no_compression_below_context_tokens(agent, drive):
    spec = agent("limits:\n  context_tokens: 100000\n", tools=TOOLS)
    script = [tool_call("big", n=n) for n in range(1, 5)] + [text("done")]
    run = await drive(spec, script, "fill")
    assert all(m["content"].startswith("line one of") for m in run.tool_results())
    assert run.transcript_events("compress") == []


async def test_the_tool_specs_count_toward_context_tokens(agent, drive):
    spec = agent("limits:\n  context_tokens: 1500\n", tools=TOOLS)
    script = [tool_call("big", n=n) for n in range(1, 6)] + [text("done")]
    run = await drive(spec, script, "fill")
    tools_chars = len(json.dumps(run.requests[0].tools))
    history_chars = sum(len(m["content"] or "") for m in run.history)
    assert tools_chars > 4000 and history_chars < 1500 * 4  # only the tools push it over
    assert run.transcript_events("compress"), "the tool specs were left out of the estimate"


async def test_tool_errors_stay_uncompressed_after_resume(agent, drive):
    first = await drive(agent(tools=TOOLS), [tool_call("broken"), text("failed")], "try")
    spec = agent("limits:\n  context_tokens: 300\n", tools=TOOLS)
    script = [tool_call("big", n=n) for n in range(1, 5)] + [text("done")]
    resumed = await drive(spec, script, "fill", resume=first.transcript())
    tools = [m["content"] for m in resumed.requests[-1].messages if m["role"] == "tool"]
    assert tools[0] == "ValueError: " + "E" * 600
    assert tools[1].startswith("[output of big compressed")
