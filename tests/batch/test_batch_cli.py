"""`runner batch` end to end: the installed command against the scripted server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runner.store.transcript import read_transcript
from tests.batch.helpers import Raw, adder, make_agent, read_out, write_inputs
from tests.cli_run.conftest import Cli


def test_one_line_per_item_in_input_order_with_answers_usage_and_transcripts(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    items = ["one", {"id": "two", "input": "second"}, {"input": "third", "vars": {"x": 1}}]
    inputs = write_inputs(tmp_path / "in.jsonl", items)
    result = cli("batch", str(agent), str(inputs), "-o", "out.jsonl", "--concurrency", "3", "--json")
    assert result.returncode == 0, result.stderr
    lines = read_out(tmp_path / "out.jsonl")
    assert [line["id"] for line in lines] == [1, "two", 3]
    assert [line["answer"] for line in lines] == ["ANSWER one: 5", "ANSWER second: 5", "ANSWER third: 5"]
    assert {line["status"] for line in lines} == {"ok"}
    for line in lines:
        assert line["usage"]["total_tokens"] > 0 and line["duration_s"] > 0 and line["error"] is None
        transcript = read_transcript(cli.home / "sessions" / f"{line['session_id']}.jsonl")
        roles = [m["role"] for m in transcript.messages()]
        assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert len({line["session_id"] for line in lines}) == 3
    summary = json.loads(result.stdout)
    assert summary["ok"] == 3 and summary["failed"] == 0 and summary["exit_code"] == 0
    assert "batch: 3 items: 3 ok" in result.stderr


def test_structured_output_lines_carry_the_object(cli: Cli, serve: Any, tmp_path: Path) -> None:
    def step(body: dict[str, Any]) -> dict[str, Any]:
        assert body["response_format"]["type"] == "json_schema"
        return {
            "content": json.dumps({"label": "spam" if "buy" in body["messages"][-1]["content"] else "ham"})
        }

    server = serve(step, repeat=True)
    extra = "output:\n  type: object\n  properties:\n    label: {enum: [spam, ham]}\n  required: [label]\n"
    agent = make_agent(tmp_path / "a", server.base_url, extra)
    inputs = write_inputs(tmp_path / "in.jsonl", ["buy now", "hello mum"])
    result = cli("batch", str(agent), str(inputs), "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert [line["output"] for line in read_out(tmp_path / "out.jsonl")] == [
        {"label": "spam"},
        {"label": "ham"},
    ]


def test_a_malformed_line_fails_with_its_line_number_and_the_batch_goes_on(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    items = ["first", Raw("{not json"), Raw(""), {"input": 7}, {"input": "x", "color": "red"}, "last"]
    inputs = write_inputs(tmp_path / "in.jsonl", items)
    result = cli("batch", str(agent), str(inputs), "-o", "out.jsonl")
    assert result.returncode == 1, result.stderr
    lines = read_out(tmp_path / "out.jsonl")
    assert [(line["id"], line["status"]) for line in lines] == [
        (1, "ok"),
        (2, "error"),
        (4, "error"),
        (5, "error"),
        (6, "ok"),
    ]
    assert lines[1]["error"].startswith("input line 2: not JSON")
    assert lines[2]["error"] == "input line 4: 'input' must be a string"
    assert "unknown key(s) 'color'" in lines[3]["error"]
    assert "Traceback" not in result.stderr


def test_duplicate_ids_are_refused_up_front_naming_both_lines(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    items = [{"id": "a", "input": "x"}, "y", {"id": "a", "input": "z"}]
    inputs = write_inputs(tmp_path / "in.jsonl", items)
    result = cli("batch", str(agent), str(inputs), "-o", "out.jsonl")
    assert result.returncode == 2
    assert "lines 1 and 3 have the same id 'a'" in result.stderr
    assert not (tmp_path / "out.jsonl").exists() and server.requests == []
    # a line without an id is known by its number, which another line's id may not take
    write_inputs(inputs, ["x", {"id": 1, "input": "y"}])
    result = cli("batch", str(agent), str(inputs), "-o", "out.jsonl")
    assert result.returncode == 2 and "lines 1 and 2 have the same id 1" in result.stderr


def test_an_empty_input_file_is_refused(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    (tmp_path / "in.jsonl").write_text("\n  \n", encoding="utf-8")
    result = cli("batch", str(agent), "in.jsonl", "-o", "out.jsonl")
    assert result.returncode == 2
    assert "error: in.jsonl has no items" in result.stderr
    result = cli("batch", str(agent), "missing.jsonl", "-o", "out.jsonl")
    assert result.returncode == 2 and "no input file missing.jsonl" in result.stderr


def test_inputs_from_standard_input(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    result = cli("batch", str(agent), "-", "-o", "out.jsonl", input='"p"\n{"id": "q", "input": "q"}\n')
    assert result.returncode == 0, result.stderr
    assert [line["answer"] for line in read_out(tmp_path / "out.jsonl")] == ["ANSWER p: 5", "ANSWER q: 5"]


def test_a_model_that_fails_for_some_items_says_why_on_their_lines(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", ["a", "please fail", "b"])
    result = cli("batch", str(agent), str(inputs), "-o", "out.jsonl")
    assert result.returncode == 1
    lines = read_out(tmp_path / "out.jsonl")
    assert [line["status"] for line in lines] == ["ok", "error", "ok"]
    assert "the model refuses 'please fail'" in lines[1]["error"] and lines[1]["transient"] is False
    assert lines[1]["session_id"] and "1 failed" in result.stderr


def test_retries_run_an_item_again_after_a_transient_failure(cli: Cli, serve: Any, tmp_path: Path) -> None:
    failed: set[str] = set()
    inner = adder()

    def step(body: dict[str, Any]) -> dict[str, Any]:
        prompt = body["messages"][-1]["content"]
        if prompt.startswith("flaky") and prompt not in failed:
            failed.add(prompt)
            return {"status": 503, "error": "overloaded"}
        return inner(body)

    server = serve(step, repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", ["flaky 1", "steady"])
    result = cli("batch", str(agent), str(inputs), "-o", "out.jsonl")
    assert result.returncode == 1
    first = read_out(tmp_path / "out.jsonl")[0]
    assert first["status"] == "error" and first["transient"] is True and "503" in first["error"]
    inputs = write_inputs(tmp_path / "in2.jsonl", ["flaky 2", "steady"])
    result = cli("batch", str(agent), str(inputs), "-o", "out2.jsonl", "--retries", "1")
    assert result.returncode == 0, result.stderr
    first = read_out(tmp_path / "out2.jsonl")[0]
    assert first["status"] == "ok" and first["attempts"] == 2 and first["answer"] == "ANSWER flaky 2: 5"


def test_an_address_without_the_ray_backend_is_refused_clearly(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text('"x"\n', encoding="utf-8")
    agent = make_agent(tmp_path / "a", "http://127.0.0.1:9/v1")
    result = cli("batch", str(agent), "in.jsonl", "-o", "out.jsonl", "--address", "10.0.0.1:6379")
    assert result.returncode == 2 and "--address names a Ray cluster" in result.stderr


def test_bad_options_are_refused_before_anything_runs(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text('"x"\n', encoding="utf-8")
    agent = make_agent(tmp_path / "a", "http://127.0.0.1:9/v1")
    result = cli("batch", str(agent), "in.jsonl", "-o", "out.jsonl", "--concurrency", "0")
    assert result.returncode == 2 and "--concurrency must be at least 1" in result.stderr
    result = cli("batch", str(agent), "in.jsonl", "-o", "in.jsonl")
    assert result.returncode == 2 and "would overwrite the inputs" in result.stderr
    assert (tmp_path / "in.jsonl").read_text(encoding="utf-8") == '"x"\n'
    result = cli("batch", str(agent), "in.jsonl", "-o", str(tmp_path))
    assert result.returncode == 2 and "is a folder" in result.stderr
    result = cli("batch", str(agent), "in.jsonl", "-o", "o.jsonl", "--backend", "spark")
    assert result.returncode == 2 and "--backend must be local or ray" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out.jsonl").exists()


def test_limit_runs_only_the_first_items_and_a_rerun_without_it_does_the_rest(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", ["a", "b", "c", "d"])
    assert cli("batch", str(agent), str(inputs), "-o", "out.jsonl", "--limit", "2").returncode == 0
    assert [line["id"] for line in read_out(tmp_path / "out.jsonl")] == [1, 2]
    before = len(server.requests)
    result = cli("batch", str(agent), str(inputs), "-o", "out.jsonl")
    assert result.returncode == 0 and "2 done before (skipped)" in result.stderr
    assert [line["id"] for line in read_out(tmp_path / "out.jsonl")] == [1, 2, 3, 4]
    assert len(server.requests) - before == 4  # two items, two requests each


def test_off_a_terminal_progress_is_plain_lines_and_a_summary(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve(adder(delay_s=0.05), repeat=True)  # a second in all: a line each tenth of the items
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", [f"n{n}" for n in range(10)])
    result = cli("batch", str(agent), str(inputs), "-o", "out.jsonl", "-c", "1")
    assert result.returncode == 0
    progress = [line for line in result.stderr.splitlines() if line.startswith("batch: ") and "/10 (" in line]
    assert progress, result.stderr
    assert "ok" in progress[-1] and "items/s" in progress[-1] and "tokens, cost unknown" in progress[-1]
    assert "\x1b[" not in result.stderr  # no terminal codes off a terminal
    assert result.stderr.rstrip().splitlines()[-1].startswith("batch: 10 items: 10 ok, 0 failed, 0 limit")


def test_on_a_terminal_progress_is_a_rich_bar_on_stderr(cli: Cli, serve: Any, tmp_path: Path) -> None:
    import os
    import pty
    import subprocess

    from tests.cli_run.conftest import RUNNER

    server = serve(adder(delay_s=0.05), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", [f"n{n}" for n in range(6)])
    leader, follower = pty.openpty()
    env = {**cli.env, "COLUMNS": "160"}
    env.pop("NO_COLOR", None)
    argv = [RUNNER, "batch", str(agent), str(inputs), "-o", "out.jsonl", "-c", "2"]
    process = subprocess.Popen(
        argv, cwd=cli.cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower
    )
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    process.wait(timeout=60)
    os.close(leader)
    text = seen.decode("utf-8", "replace")
    assert process.returncode == 0, text
    assert "6/6" in text and "━" in text  # rich's bar and its count
    assert "batch: 6 items: 6 ok" in text


def test_batch_help_is_plain_has_an_example_and_imports_nothing_heavy() -> None:
    import subprocess
    import sys

    from tests.test_startup_imports import HEAVY, _imported_modules

    out = subprocess.run(
        [sys.executable, "-m", "runner", "batch", "--help"],
        capture_output=True,
        text=True,
        env={"COLUMNS": "100"},
    )
    assert out.returncode == 0, out.stderr
    assert "<str>" not in out.stdout and "Example: runner batch" in out.stdout
    assert "--max-cost-usd" in out.stdout and "--unordered" in out.stdout and "--backend" in out.stdout
    assert sorted(set(HEAVY) & _imported_modules("batch", "--help")) == []


def test_fast_path_with_litellm_path_gives_the_same_lines(cli: Cli, serve: Any, tmp_path: Path) -> None:
    """Both model paths answer the same items the same (timing, session ids, the server's token estimate
    of each body and the wording of the error aside)."""
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", ["a", {"id": "b", "input": "bee"}, "please fail"])
    lines = {}
    for fast in ("1", "0"):
        result = cli(
            "batch", str(agent), str(inputs), "-o", f"out{fast}.jsonl", extra_env={"RUNNER_FAST_PATH": fast}
        )
        assert result.returncode == 1, result.stderr
        lines[fast] = [
            {k: v for k, v in line.items() if k not in ("duration_s", "session_id", "error", "usage")}
            for line in read_out(tmp_path / f"out{fast}.jsonl")
        ]
    assert lines["1"] == lines["0"]
    assert [line["status"] for line in lines["0"]] == ["ok", "ok", "error"]


def test_rate_limits_wrap_the_pooled_clients_and_every_item_still_runs(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", [f"n{n}" for n in range(20)])
    result = cli(
        "batch", str(agent), str(inputs), "-o", "out.jsonl", "-c", "16", "--rpm", "600", "--tpm", "100000"
    )
    assert result.returncode == 0, result.stderr
    lines = read_out(tmp_path / "out.jsonl")
    assert [line["answer"] for line in lines] == [f"ANSWER n{n}: 5" for n in range(20)]
    assert len(server.requests) == 40


def test_the_agents_secrets_are_redacted_in_the_output_file(cli: Cli, serve: Any, tmp_path: Path) -> None:
    secret = "sk-batch-0123456789abcdef"
    server = serve([{"content": f"the key is {secret}"}], repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", ["leak it"])
    result = cli("batch", str(agent), str(inputs), "-o", "out.jsonl", extra_env={"TEST_API_KEY": secret})
    assert result.returncode == 0, result.stderr
    assert server.headers[0]["authorization"] == f"Bearer {secret}"  # the key was in use
    text = (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    assert secret not in text and read_out(tmp_path / "out.jsonl")[0]["answer"] == "the key is ***"
