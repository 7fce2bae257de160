"""An answer's check within its budget, off the event loop (``modes/structured.py`` ``read_checked``).

A check past its steps, or a worker thread that does not answer in time, is an answer that does
not match: the model is told why and tries again; the event loop never waits for the check.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from runner.agentfile import schema_budget
from runner.modes.structured import OutputPlan
from runner.testing import text
from tests.session.conftest import Agents, Driver

OUTPUT = """
output:
  type: object
  properties:
    items: {type: array, items: {type: object, properties: {n: {type: integer}}}}
  required: [items]
"""
SMALL = {"items": [{"n": 1}]}


async def test_an_answer_past_the_check_steps_goes_back_to_the_model(
    agent: Agents, drive: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema_budget, "MAX_CHECK_STEPS", 10_000)
    big = {"items": [{"n": i} for i in range(20_000)]}
    run = await drive(agent(OUTPUT), [text(json.dumps(big)), text(json.dumps(SMALL))], "items?")
    assert run.result.data == SMALL
    repair = [m["content"] for m in run.history if m["role"] == "user"][1]
    assert "the answer could not be checked within 10,000 steps (MAX_CHECK_STEPS)" in repair


async def test_a_check_that_does_not_answer_in_time_is_refused_without_waiting_for_it(
    agent: Agents, drive: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema_budget, "CHECK_TIME_S", 0.01)
    release = threading.Event()
    real = OutputPlan.read
    calls: list[int] = []

    def stuck(self: OutputPlan, reply: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            assert release.wait(30)  # a check that ignores its budget (one long regex match, say)
        return real(self, reply)

    monkeypatch.setattr(OutputPlan, "read", stuck)
    long_answer = json.dumps({"items": [{"n": i} for i in range(3000)]})  # read in a worker thread
    try:
        run = await drive(agent(OUTPUT), [text(long_answer), text(json.dumps(SMALL))], "items?")
    finally:
        release.set()
    assert run.result.data == SMALL
    repair = [m["content"] for m in run.history if m["role"] == "user"][1]
    assert "the answer could not be checked within 0.01 s" in repair
