"""The suite writes nothing into the checkout (issue 23, item 15): a session run from the repository's
own folder keeps its transcript in the test's ``RUNNER_HOME``, not in the checkout's ``.runner/``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.main import app
from runner.testing import ScriptedServer
from tests.conftest import CHECKOUT_HOME, checkout_files

ROOT = CHECKOUT_HOME.parent


def test_a_session_run_from_the_checkout_writes_no_file_into_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        "version: 1\nname: reviewer\nmodel:\n  id: openai/scripted\n  api_base: ${REVIEW_BASE}\n"
        "prompts:\n  system: You answer.\n"
    )
    monkeypatch.chdir(ROOT)  # where the suite runs from: the default RUNNER_HOME is ./.runner
    before = checkout_files()
    with ScriptedServer([{"content": "Yes."}]) as server:
        monkeypatch.setenv("REVIEW_BASE", server.base_url)
        result = CliRunner().invoke(app, ["run", str(agent), "-p", "Is water wet?"])
    assert result.exit_code == 0, result.output
    assert checkout_files() == before, "the session wrote into the checkout's .runner/"
    home = Path(os.environ["RUNNER_HOME"])
    assert ROOT not in home.resolve().parents
    assert list((home / "sessions").glob("*.jsonl")), "the transcript went to the test's RUNNER_HOME"
