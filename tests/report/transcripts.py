"""Transcripts the page tests write: records as the session writes them, at chosen times."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

START = dt.datetime(2026, 12, 1, 12, 0, 0, tzinfo=dt.UTC)


def at(ms: float) -> str:
    return (START + dt.timedelta(milliseconds=ms)).isoformat(timespec="milliseconds")


def header(session_id: str = "20261201-120000-abcdefabcdef", **extra: Any) -> dict[str, Any]:
    return {
        "type": "header",
        "format": 1,
        "runner_version": "0.1.0",
        "started_at": at(0),
        "session_id": session_id,
        "agent": "calc",
        "agent_path": "/tmp/agent.yaml",
        "agent_sha256": "0" * 64,
        "git": None,
        "model": "scripted",
        **extra,
    }


def event(ms: float, name: str, **data: Any) -> dict[str, Any]:
    return {"type": "event", "event": name, "time": at(ms), "data": data}


def message(ms: float, role: str, content: Any = None, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "time": at(ms), "role": role, "content": content, **extra}


def call(call_id: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def usage(prompt: int, completion: int, cost: float | None = None, *, cached: int = 0) -> dict[str, Any]:
    used: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion}
    used["total_tokens"] = prompt + completion
    if cost is not None:
        used["cost_usd"] = cost
    if cached:  # as the session writes it: only when the provider read some from its cache
        used["cached_tokens"] = cached
    return used


def one_turn(
    *, text: str = "3 and 7", args: tuple[Any, Any] = ({"a": 1, "b": 2}, {"a": 3, "b": 4})
) -> list[dict[str, Any]]:
    """A turn: a model call with two parallel tool calls, their results, the answer."""
    calls = [call("call_1", "add", args[0]), call("call_2", "add", args[1])]
    return [
        event(1, "turn", turn=1, config="4cc1c0c045190b8f"),
        message(2, "user", "add these"),
        message(402, "assistant", None, tool_calls=calls, usage=usage(120, 30, 0.0012), duration_s=0.4),
        message(650, "tool", "3", tool_call_id="call_1", name="add", duration_s=0.2),
        message(
            700,
            "tool",
            "error: b is wrong",
            tool_call_id="call_2",
            name="add",
            duration_s=0.25,
            is_error=True,
        ),
        message(1500, "assistant", text, usage=usage(160, 12, 0.0008), duration_s=0.8, first_token_s=0.3),
        event(1501, "turn_end", turn=1, reason="done"),
    ]


def write(path: Path, records: list[dict[str, Any]], *, tail: str = "") -> Path:
    """Each record as one line (and ``tail`` after them, as it is: a torn line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    path.write_text(lines + tail, encoding="utf-8")
    return path


def many_steps(steps: int) -> list[dict[str, Any]]:
    """One turn of ``steps`` model calls, each calling one tool: a long session."""
    records: list[dict[str, Any]] = [event(0, "turn", turn=1, config="c0"), message(1, "user", "go")]
    t = 2.0
    for n in range(1, steps + 1):
        call_id = f"call_{n}"
        t += 5
        records.append(
            message(
                t, "assistant", None, tool_calls=[call(call_id, "add", {"a": n, "b": 1})], usage=usage(50, 5)
            )
        )
        records[-1]["duration_s"] = 0.004
        t += 2
        records.append(message(t, "tool", str(n + 1), tool_call_id=call_id, name="add", duration_s=0.002))
    records.append(
        message(t + 5, "assistant", f"done after {steps} steps", usage=usage(50, 5), duration_s=0.004)
    )
    records.append(event(t + 6, "turn_end", turn=1, reason="done"))
    return records
