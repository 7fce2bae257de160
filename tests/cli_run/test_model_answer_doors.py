"""What `runner run` and `runner batch` do with a model answer that never ends or has no choices.

Issue 23: a stream that drips a chunk every 0.2 s forever kept `run` going forever (item 24); a
stream of `choices: []` chunks was a silent success, `run` exiting 0 and a batch line `ok` with an
empty answer (item 25). On the fast path here; tests/models/test_total_timeout.py and
test_empty_answers.py hold the litellm path to the same in process, without its seconds of import.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.cli_run.conftest import Cli, write_agent

DRIP = 1000


def agent(base_url: str, model: str = "") -> str:
    text = (
        "version: 1\nname: doors\nmodel:\n  id: openai/scripted\n"
        f"  api_base: {base_url}\n  api_key: ${{TEST_KEY:-sk-test}}\n  retries: 1\n"
    )
    return text + model + "prompts:\n  system: Answer.\n"


def no_choices() -> dict[str, Any]:
    base = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    usage = {"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5}
    return {"frames": [{**base, "choices": []}, {**base, "choices": [], "usage": usage}]}


def test_run_stops_a_stream_that_never_ends_at_model_total_timeout_s(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([{"content": "x " * DRIP, "chunk_delay_s": 0.2}], chunks=DRIP)
    path = write_agent(tmp_path / "a", agent(server.base_url, "  total_timeout_s: 2\n"))
    started = time.monotonic()
    result = cli("run", str(path), "-p", "Talk.", timeout=150)
    assert result.returncode == 1, result.stderr
    assert "the answer did not end within 2 s (model.total_timeout_s)" in result.stderr
    assert "Traceback" not in result.stderr
    # well before the stream's 200 s (litellm's start-up alone takes tens of seconds on a loaded machine)
    assert time.monotonic() - started < DRIP * 0.2 / 2
    assert len(server.requests) == 1  # text was shown: not asked again


def test_run_of_an_answer_without_choices_fails_with_a_clear_message(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([no_choices()])
    path = write_agent(tmp_path / "a", agent(server.base_url))
    result = cli("run", str(path), "-p", "Hi")
    assert result.returncode == 1, result.stderr
    assert "the server's answer has no choices" in result.stderr
    assert result.stdout.strip() == ""
    server.assert_complete()  # not retried: the server answered, with nothing


def test_a_batch_line_without_choices_is_not_ok(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve([no_choices()])
    path = write_agent(tmp_path / "a", agent(server.base_url))
    inputs = tmp_path / "in.jsonl"
    inputs.write_text(json.dumps({"id": "one", "input": "Hi"}) + "\n", encoding="utf-8")
    result = cli("batch", str(path), str(inputs), "-o", "out.jsonl")
    assert result.returncode != 0, result.stderr
    (line,) = [json.loads(text) for text in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert line["status"] != "ok"
    assert "no choices" in (line["error"] or "")
