"""A transcript as a timeline: rows on one time axis, totals, and what could not be read.

The rows are plain dicts (what the page's script draws), in the order things happened:

- ``turn``: a turn began (``n``; the configuration hash it ran under);
- ``model``: one model call, from when it was sent (``s``) to its reply (``e``), with its first token
  (``ft``), tokens in and out (``cached``: the input tokens read from the provider's prompt cache),
  cost, the provider's id of the answer (``rid``), the text, the reasoning and how many tools it
  called;
- ``tool``: one tool call, from its start to its result, with its arguments and result (``par``/``of``:
  its place among the calls of the same reply, which ran side by side);
- ``config``: the configuration changed (a reload), with ``runner diff``'s comparison of the two;
- ``note``: any other event (hook decisions, limits, errors, interrupts, reloads, sub-agents, ...);
- ``answer`` / ``output``: the final answer and the structured output.

Times are milliseconds from the session's start. A workflow's transcript becomes lanes: one row per
step run (``step``: its lane is the step's id), each from its ``step_start`` to its ``step_end``.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any

from runner.store.transcript import Transcript

__all__ = ["TEXT_LIMIT", "session_timeline"]

#: The characters of one text (a message, arguments, a result) a page keeps; the transcript has it all.
TEXT_LIMIT = 20_000
#: Events shown as their own ``note`` rows (the others are bookkeeping the page leaves out).
NOTE_EVENTS = frozenset(
    {
        "hook",
        "limit",
        "error",
        "interrupt",
        "reload",
        "reload_failed",
        "resume",
        "undo",
        "queue_drop",
        "compress",
        "subagent",
        "output_invalid",
        "output_fallback",
        "model",
        "vars",
        "repaired",
        "max_steps",
        "repeat",
    }
)
#: How the result of a call that did not run begins (``session/gate.py``'s decisions).
_NOT_RUN = ("Denied by", "Not executed", "The user declined")
#: Note events that mark a problem (drawn in the error colour).
BAD_EVENTS = frozenset({"error", "limit", "interrupt", "reload_failed", "max_steps", "repeat"})


def clip(text: Any) -> str:
    """``text`` as a string of at most ``TEXT_LIMIT`` characters, saying how much was left out."""
    if text is None:
        return ""
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False, indent=1, default=str)
    if len(text) <= TEXT_LIMIT:
        return text
    return f"{text[:TEXT_LIMIT]}\n[... {len(text) - TEXT_LIMIT:,} more characters in the transcript]"


def _when(value: Any) -> float | None:
    """An ISO 8601 time as epoch milliseconds (None: absent or unreadable)."""
    if not isinstance(value, str):
        return None
    try:
        return _dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000.0
    except ValueError:
        return None


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


class _Builder:
    """Walks the records once, keeping the rows and the running totals."""

    def __init__(self, transcript: Transcript, skipped: list[str]) -> None:
        self.t = transcript
        self.skipped = list(skipped)
        self.rows: list[dict[str, Any]] = []
        self.origin = _when(transcript.header.get("started_at"))
        self.last = 0.0  # the latest time seen (ms from the origin)
        self.step = 0
        self.turn = 0
        self.calls: dict[str, dict[str, Any]] = {}  # tool rows by call id, until their result
        self.starts: dict[str, float] = {}  # tool_start times by call id
        self.totals: dict[str, Any] = {"turns": 0, "steps": 0, "tools": 0, "errors": 0}
        self.tokens_in = self.tokens_out = 0
        self.cached: int | None = None  # None: no call recorded cached input tokens
        self.cost: float | None = None
        self.snapshots: dict[str, Any] = {}
        self.config: str | None = None
        self.answer: str | None = None
        self.answer_turn = 0
        self.output: Any = None
        self.untimed = 0

    def at(self, record: dict[str, Any]) -> float:
        when = _when(record.get("time"))
        if when is None:
            self.untimed += 1
            return self.last
        if self.origin is None:
            self.origin = when
        self.last = max(self.last, when - self.origin)
        return when - self.origin

    def add(self, record: dict[str, Any]) -> None:
        if record.get("type") == "message":
            self.message(record)
        else:
            self.event(record)

    # ----------------------------------------------------------------- messages

    def message(self, record: dict[str, Any]) -> None:
        role = record.get("role")
        end = self.at(record)
        if role == "assistant":
            self.model_call(record, end)
        elif role == "tool":
            self.tool_result(record, end)
        elif role == "user" and self.rows and self.rows[-1]["k"] == "turn" and "input" not in self.rows[-1]:
            self.rows[-1]["input"] = clip(record.get("content"))

    def model_call(self, record: dict[str, Any], end: float) -> None:
        self.step += 1
        usage = _dict(record.get("usage"))
        took = _number(record.get("duration_s")) * 1000.0
        calls = [c for c in record.get("tool_calls") or () if isinstance(c, dict)]
        row: dict[str, Any] = {
            "k": "model",
            "step": self.step,
            "turn": self.turn,
            "s": end - took if took else end,
            "e": end,
            "in": int(_number(usage.get("prompt_tokens"))),
            "out": int(_number(usage.get("completion_tokens"))),
            "text": clip(record.get("content")),
            "calls": len(calls),
        }
        if not took:
            row["untimed"] = True
        if isinstance(record.get("first_token_s"), int | float):
            row["ft"] = float(record["first_token_s"]) * 1000.0
        if isinstance(usage.get("cost_usd"), int | float):
            row["cost"] = float(usage["cost_usd"])
            self.cost = (self.cost or 0.0) + row["cost"]
        if record.get("reasoning"):
            row["reasoning"] = clip(record["reasoning"])
        if isinstance(record.get("response_id"), str) and record["response_id"]:
            row["rid"] = clip(record["response_id"])
        cached = int(_number(usage.get("cached_tokens")))
        if cached > 0:
            row["cached"] = cached
            self.cached = (self.cached or 0) + cached
        self.tokens_in += row["in"]
        self.tokens_out += row["out"]
        self.rows.append(row)
        for index, call in enumerate(calls):
            function = _dict(call.get("function"))
            call_id = str(call.get("id", ""))
            tool = {
                "k": "tool",
                "step": self.step,
                "turn": self.turn,
                "id": call_id,
                "name": str(function.get("name", "?")),
                "args": clip(function.get("arguments")),
                "par": index,
                "of": len(calls),
                "s": self.starts.pop(call_id, end),
                "e": None,
            }
            if tool["s"] != end:
                tool["streamed"] = True
            self.calls[call_id] = tool
            self.rows.append(tool)
        if record.get("content") and not calls:
            self.answer, self.answer_turn = str(record["content"]), self.turn

    def tool_result(self, record: dict[str, Any], end: float) -> None:
        call_id = str(record.get("tool_call_id", ""))
        row = self.calls.pop(call_id, None)
        if row is None:  # a result of a call this file does not hold (resumed, cut): its own row
            row = {"k": "tool", "step": self.step, "turn": self.turn, "id": call_id, "args": "", "par": 0}
            row.update(of=1, name=str(record.get("name", "?")), s=end)
            self.rows.append(row)
        took = _number(record.get("duration_s")) * 1000.0
        row["e"] = end
        if took and row.pop("streamed", False):  # started while the reply streamed: it ran from then
            row["e"] = min(end, row["s"] + took)
        elif took:  # started when the reply was complete: its result is written when it ends
            row["s"] = max(row["s"], end - took)
        row["result"] = clip(record.get("content"))
        self.totals["tools"] += 1
        if row["result"].startswith(_NOT_RUN):  # a hook, a permission rule or the user said no
            row["denied"] = row["result"].split(":", 1)[0].split(".", 1)[0]
        if record.get("is_error"):
            row["err"] = True
            self.totals["errors"] += 1

    # ----------------------------------------------------------------- events

    def event(self, record: dict[str, Any]) -> None:
        name = str(record.get("event", ""))
        data = _data(record)
        when = self.at(record)
        if name == "turn":
            self.turn = int(_number(data.get("turn"))) or self.turn + 1
            self.totals["turns"] = max(self.totals["turns"], self.turn)
            row = {"k": "turn", "n": self.turn, "t": when, "config": data.get("config")}
            self.rows.append(row if not data.get("continued") else {**row, "continued": True})
        elif name == "tool_start":
            call = _dict(data.get("call"))
            self.starts[str(call.get("id", ""))] = when
        elif name == "config" and isinstance(data.get("snapshot"), dict):
            self.config_changed(str(data.get("hash")), data["snapshot"], when)
        elif name == "output":
            self.output = data.get("value")
        elif name in NOTE_EVENTS:
            self.note(name, data, when)

    def note(self, name: str, data: dict[str, Any], when: float) -> None:
        text = data.get("message") or data.get("note") or data.get("error") or data.get("reason")
        detail = clip(data)
        row = {
            "k": "note",
            "name": name,
            "t": when,
            "turn": self.turn,
            "text": clip(text or ""),
            "data": detail,
        }
        if name in BAD_EVENTS or (name == "hook" and (data.get("error") or data.get("stop"))):
            row["bad"] = True
            if name == "error":
                self.totals["errors"] += 1
        self.rows.append(row)

    def config_changed(self, digest: str, snapshot: dict[str, Any], when: float) -> None:
        before = self.config
        self.snapshots[digest] = snapshot
        self.config = digest
        if before is None or before == digest or before not in self.snapshots:
            return
        from runner.agentdiff import compare, format_diff

        diff = compare(self.snapshots[before], snapshot, old_label=before, new_label=digest)
        lines = format_diff(diff).splitlines()[2:] if not diff.same else []
        text = "\n".join(lines) or "(only the files changed: nothing runner diff compares)"
        self.rows.append(
            {"k": "config", "t": when, "turn": self.turn, "old": before, "new": digest, "diff": clip(text)}
        )

    # ----------------------------------------------------------------- the end

    def finish(self) -> dict[str, Any]:
        for row in self.calls.values():  # calls that got no result: the file ends before them
            row["e"], row["open"] = self.last, True
        if self.calls:
            self.skipped.append(f"{len(self.calls)} tool call(s) without a result: the transcript ends first")
        if self.untimed:
            self.skipped.append(
                f"{self.untimed} record(s) without a readable time: placed after the one before"
            )
        if self.answer is not None:
            self.rows.append(
                {"k": "answer", "t": self.last, "turn": self.answer_turn, "text": clip(self.answer)}
            )
        if self.output is not None:
            self.rows.append({"k": "output", "t": self.last, "turn": self.turn, "text": clip(self.output)})
        self.totals.update(
            steps=self.step,
            tokens_in=self.tokens_in,
            tokens_out=self.tokens_out,
            cached_in=self.cached,
            cost_usd=self.cost,
            duration_ms=self.last,
        )
        return {"rows": self.rows, "totals": self.totals, "skipped": self.skipped}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _data(record: dict[str, Any]) -> dict[str, Any]:
    return _dict(record.get("data"))


class _Workflow:
    """A workflow's transcript: a row per step run, its lane the step's id."""

    def __init__(self, transcript: Transcript, skipped: list[str]) -> None:
        self.t = transcript
        self.notes = _Builder(transcript, skipped)  # times, notes, what was skipped
        self.open: dict[str, dict[str, Any]] = {}
        self.lanes: list[str] = []
        self.rows: list[dict[str, Any]] = []
        self.totals: dict[str, Any] = {"steps": 0, "errors": 0, "tokens": 0, "cost_usd": None}
        self.output: Any = None

    def start(self, data: dict[str, Any], when: float) -> None:
        lane = str(data.get("id", "?"))
        if lane not in self.lanes:
            self.lanes.append(lane)
        key = str(data.get("key", lane))
        row = {"k": "step", "lane": lane, "key": key, "s": when, "e": None}
        row.update(kind=data.get("kind"), agent=data.get("agent"))
        self.open[key] = row
        self.rows.append(row)

    def end(self, data: dict[str, Any], when: float) -> None:
        row = self.open.pop(str(data.get("key", data.get("id", "?"))), None)
        if row is None:
            return
        row.update(e=when, status=data.get("status"), output=clip(data.get("output")))
        row.update(session=data.get("session_id"), tokens=data.get("tokens"), cost=data.get("cost_usd"))
        totals = self.totals
        if data.get("error"):
            row["error"] = clip(data["error"])
            totals["errors"] += 1
        totals["steps"] += 1
        totals["tokens"] += int(_number(data.get("tokens")))
        if isinstance(data.get("cost_usd"), int | float):
            totals["cost_usd"] = (totals["cost_usd"] or 0.0) + float(data["cost_usd"])

    def build(self) -> dict[str, Any]:
        notes = self.notes
        for record in self.t.records:
            if record.get("type") != "event":
                continue
            name, when, data = str(record.get("event")), notes.at(record), _data(record)
            if name == "step_start":
                self.start(data, when)
            elif name == "step_end":
                self.end(data, when)
            elif name == "workflow_end":
                self.output = data.get("output")
                self.totals["status"] = data.get("status")
            elif name in NOTE_EVENTS:
                notes.note(name, data, when)
        for row in self.open.values():
            row["e"], row["open"] = notes.last, True
        if self.open:
            notes.skipped.append(f"{len(self.open)} step(s) without an end: the transcript ends first")
        rows = self.rows + notes.rows  # the notes after the steps (the page orders them by lane)
        if self.output is not None:
            rows.append({"k": "output", "t": notes.last, "text": clip(self.output)})
        self.totals["duration_ms"] = notes.last
        return {"rows": rows, "lanes": self.lanes, "totals": self.totals, "skipped": notes.skipped}


def session_timeline(transcript: Transcript, skipped: list[str] | None = None) -> dict[str, Any]:
    """The page data of one session (or one workflow run): header, totals, rows, what was skipped."""
    header = transcript.header
    keep = ("session_id", "agent", "agent_path", "model", "started_at", "runner_version", "workflow", "git")
    info = {key: header[key] for key in keep if key in header}
    info.setdefault("session_id", transcript.session_id)
    info["status"] = transcript.status()
    if "workflow" in header:
        data = _Workflow(transcript, list(skipped or ())).build()
        kind = "workflow"
    else:
        builder = _Builder(transcript, list(skipped or ()))
        for record in transcript.records:
            builder.add(record)
        data = builder.finish()
        kind = "session"
    return {"kind": kind, "header": info, **data}
