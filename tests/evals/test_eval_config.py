"""`evals:`, `judge:`, `repeat:` and `expect.judge` in the agent file, as `AgentConfig` carries them."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.agentfile import load_agent
from runner.errors import ConfigError
from runner.evals import eval_cases, judge_config

BODY = """version: 1
name: geo
model: openai/gpt-4o-mini
judge:
  id: openai/gpt-4o
  api_base: http://127.0.0.1:9/v1
  api_key: ${JUDGE_KEY}
  temperature: 0
tests:
  - name: replayed
    input: hi
evals:
  - name: polite
    input: greet me
    repeat: 7
    vars: {tone: warm}
    expect:
      judge: The answer is polite.
      output_contains: hello
  - name: once
    input: hi
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_evals_judge_and_repeat_are_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_KEY", "sk-judge-secret")
    config = load_agent(_write(tmp_path, BODY))
    polite, once = config.evals
    assert (polite.name, polite.repeat, polite.vars, once.repeat) == ("polite", 7, {"tone": "warm"}, 1)
    assert polite.expect.judge == "The answer is polite." and polite.expect.output_contains == ("hello",)
    assert once.expect.judge is None
    assert [case.name for case in config.tests] == ["replayed"]
    assert config.judge is not None and config.judge.id == "openai/gpt-4o" and config.judge.temperature == 0
    assert "sk-judge-secret" in config.secrets  # redacted from transcripts like the model's key
    # eval runs evals: over tests:, --repeat over each case's repeat:
    assert [(c.name, c.repeat) for c in eval_cases(config)] == [("polite", 7), ("once", 1)]
    assert [c.repeat for c in eval_cases(config, 3)] == [3, 3]
    # --judge replaces the id and keeps the file's other judge options, as --model does
    judge = judge_config(config, "openai/other")
    assert judge is not None and (judge.id, judge.api_base) == ("openai/other", "http://127.0.0.1:9/v1")


def test_without_evals_the_tests_are_the_cases(tmp_path: Path) -> None:
    head, _, _ = BODY.partition("evals:")
    config = load_agent(_write(tmp_path, head.replace("judge:\n", "x-judge:\n").replace("${JUDGE_KEY}", "k")))
    assert [c.name for c in eval_cases(config)] == ["replayed"]
    assert judge_config(config, None) is None


def test_a_literal_judge_api_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"judge\.api_key: a literal API key is not allowed"):
        load_agent(_write(tmp_path, BODY.replace("${JUDGE_KEY}", "sk-literal")))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("repeat: 7", "repeat: 0"), r"evals\[0\]\.repeat"),
        (("judge: The answer is polite.", "judge: ''"), r"evals\[0\]\.expect\.judge: must not be empty"),
        (("name: once", "name: polite"), "two cases are named 'polite'"),
    ],
)
def test_bad_eval_cases_are_refused(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    text = BODY.replace("${JUDGE_KEY}", "${JUDGE_KEY:-k}").replace(*change)
    with pytest.raises(ConfigError, match=message):
        eval_cases(load_agent(_write(tmp_path, text)))
