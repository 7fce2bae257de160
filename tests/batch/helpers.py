"""An agent with one tool and a scripted server that answers each item by its input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli_run.conftest import write_agent

TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


def agent_yaml(base_url: str, extra: str = "") -> str:
    return (
        "version: 1\nname: adder\nmodel:\n  id: openai/scripted\n"
        f"  api_base: {base_url}\n  api_key: ${{TEST_API_KEY:-sk-none}}\n  retries: 0\n"
        "prompts:\n  system: You add numbers.\ntools:\n  - python: tools_mod\n" + extra
    )


def make_agent(folder: Path, base_url: str, extra: str = "") -> Path:
    return write_agent(folder, agent_yaml(base_url, extra), tools=TOOLS)


def last_user(body: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def adder(delay_s: float = 0.0, fail: str = "fail") -> Any:
    """A script: one `add` call per item, then "ANSWER <input>: <sum>"; an input with ``fail`` gets a 400."""

    def step(body: dict[str, Any]) -> dict[str, Any]:
        prompt = last_user(body)
        if fail in prompt:
            return {"status": 400, "error": f"the model refuses {prompt!r}"}
        last = body["messages"][-1]
        if last["role"] == "tool":
            return {"content": f"ANSWER {prompt}: {last['content']}", "delay_s": delay_s}
        return {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}], "delay_s": delay_s}

    return step


class Raw(str):
    """An input line written as it is (not as JSON)."""


def write_inputs(path: Path, lines: list[Any]) -> Path:
    text = "".join((x if isinstance(x, Raw) else json.dumps(x)) + "\n" for x in lines)
    path.write_text(text, encoding="utf-8")
    return path


def read_out(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def check_batch_trace(spans: list[Any], items: int) -> None:
    """A batch's spans as a receiver got them: one ``batch`` span, ``items`` ``batch_item`` spans in
    its trace beneath it, and each item's ``invoke_agent`` beneath its item."""
    batch = next(s for s in spans if s.name.startswith("batch "))
    lines = [s for s in spans if s.name.startswith("batch_item ")]
    assert len(lines) == items, [s.name for s in spans]
    assert {s.trace_id for s in lines} == {batch.trace_id}
    assert {s.parent_span_id for s in lines} == {batch.span_id}
    agents = [s for s in spans if s.name.startswith("invoke_agent ")]
    assert len(agents) == items and {s.parent_span_id for s in agents} == {s.span_id for s in lines}
