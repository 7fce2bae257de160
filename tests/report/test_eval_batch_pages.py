"""`runner eval --html`, `runner batch --html` and `runner report FILE`: real runs against the scripted
server, their pages opened in headless Chromium."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli_run.conftest import Cli, cli, path_kind
from tests.report.conftest import Opened, assert_not_blank, page_data

# the module's browser is started once: all its tests on one worker (xdist loadgroup)
pytestmark = pytest.mark.xdist_group("pages-eval-batch")

__all__ = ["cli", "path_kind"]  # the installed `runner` in a subprocess (batch handles signals)

AGENT = """\
version: 1
name: geo
model:
  id: openai/agent
  api_base: {base}
  api_key: ${{TEST_API_KEY:-sk-none}}
  retries: 0
prompts:
  system: {system}
"""
CASES = """evals:
  - name: capital
    input: capital of France
    repeat: 4
    expect: {output_contains: Paris}
  - name: greet
    input: greet me
    repeat: 2
    expect: {output_contains: Hello}
"""


def _last_user(body: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


class Geo:
    """Under the v1 prompt every capital answer is right; under v2, one of four. Greetings say Hello,
    and one of them carries hostile markup."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.capitals = 0

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt, system = _last_user(body), body["messages"][0]["content"]
        if prompt.startswith("capital"):
            with self.lock:
                self.capitals += 1
                n = self.capitals
            right = "v1" in system or n % 4 == 1
            return {"content": "Paris." if right else "<img src=x onerror=alert(1)> Lyon."}
        if prompt.startswith("greet"):
            return {"content": "Hello <script>alert('hi')</script>"}
        if "fail" in prompt:
            return {"status": 400, "error": f"the model refuses {prompt!r}"}
        return {"content": f"ANSWER {prompt}"}


def _git(folder: Path, *args: str) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(folder), *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def test_eval_page_charts_pass_rates_with_intervals_and_drills_into_each_case(
    invoke: Callable[..., Any], scripted_server: Any, open_page: Callable[[Path], Opened], tmp_path: Path
) -> None:
    server = scripted_server(Geo(), repeat=True)
    folder = tmp_path / "a"
    folder.mkdir()
    agent = folder / "agent.yaml"
    agent.write_text(AGENT.format(base=server.base_url, system="You answer (v2).") + CASES, encoding="utf-8")
    page = tmp_path / "eval.html"
    result = invoke("eval", str(agent), "--concurrency", "1", "--html", str(page))
    assert result.exit_code == 1, result.output  # capital passes 1 of 4
    data = page_data(page)
    assert [(c["name"], c["passes"], c["runs"]) for c in data["now"]["cases"]] == [
        ("capital", 1, 4),
        ("greet", 2, 2),
    ]
    assert len(data["runs"]["capital"]) == 4

    opened = open_page(page)
    opened.check_clean()
    rates = opened.page.locator("#cases .rate.now").evaluate_all("dots => dots.map(d => d.dataset.rate)")
    assert rates == ["0.25", "1"]
    intervals = opened.page.locator("#cases .ci").count()
    assert intervals == 2
    cells = opened.page.locator("#cases tr.case").first.locator("td").all_text_contents()
    assert cells[:7] == ["capital", "4", "1", "3", "0", "25%", "5%–70%"]  # the Wilson interval of 1 of 4
    opened.page.locator("#cases tr.case").first.click()
    assert opened.page.locator("#details tr.run").count() == 4
    assert "the output does not contain 'Paris'" in opened.text("#details")
    assert opened.page.evaluate("() => document.querySelectorAll('img, script:not([id])').length") == 1
    assert_not_blank(opened)
    opened.check_clean()


def test_eval_against_a_revision_shows_both_side_by_side(
    invoke: Callable[..., Any], scripted_server: Any, open_page: Callable[[Path], Opened], tmp_path: Path
) -> None:
    server = scripted_server(Geo(), repeat=True)
    repo = tmp_path / "repo"
    repo.mkdir()
    agent = repo / "agent.yaml"
    _git(repo, "init", "-q")
    for version in ("v1", "v2"):
        agent.write_text(
            AGENT.format(base=server.base_url, system=f"You answer ({version}).") + CASES, encoding="utf-8"
        )
        _git(repo, "add", ".")
        _git(repo, "commit", "-q", "-m", version)
    page = tmp_path / "against.html"
    result = invoke("eval", str(agent), "--concurrency", "1", "--against", "HEAD~1", "--html", str(page))
    assert result.exit_code in (0, 1), result.output
    opened = open_page(page)
    opened.check_clean()
    assert "against HEAD~1" in opened.text("h1")
    headings = opened.page.locator("#cases th").all_text_contents()
    assert headings[5] == "before" and headings[-3:] == ["change", "p", "verdict"]
    first = opened.page.locator("#cases tr.case").first
    assert first.locator(".rate.before").get_attribute("data-rate") == "1"
    assert first.locator(".rate.now").get_attribute("data-rate") == "0.25"
    assert first.locator("td").nth(5).text_content() == "100%"
    assert first.locator("td").nth(9).text_content() == "-75%"
    first.click()
    assert opened.page.locator("#details h2", has_text="Runs before").count() == 1
    assert opened.page.locator("#details tr.run").count() == 8  # four runs on each side
    opened.check_clean()


def _inputs(path: Path, items: list[Any]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return path


def test_batch_html_after_the_run_and_runner_report_of_the_output_file(
    cli: Cli,
    invoke: Callable[..., Any],
    scripted_server: Any,
    open_page: Callable[[Path], Opened],
    tmp_path: Path,
) -> None:
    server = scripted_server(Geo(), repeat=True)
    agent = tmp_path / "agent.yaml"
    agent.write_text(AGENT.format(base=server.base_url, system="You answer."), encoding="utf-8")
    inputs = _inputs(tmp_path / "in.jsonl", ["one", {"id": "bad", "input": "please fail"}, "greet <b>me</b>"])
    out, page = tmp_path / "out.jsonl", tmp_path / "batch.html"
    result = cli("batch", str(agent), str(inputs), "-o", str(out), "--concurrency", "1", "--html", str(page))
    assert result.returncode == 1, result.stderr  # one item failed
    assert f"wrote {page.name}" in result.stderr
    opened = open_page(page)
    opened.check_clean()
    assert opened.text("[data-total='items'] b") == "3"
    assert opened.text("[data-total='not ok'] b") == "1"
    statuses = opened.page.locator("#status-chart div").evaluate_all(
        "parts => parts.map(p => p.dataset.status)"
    )
    assert sorted(statuses) == ["error", "ok"]
    assert opened.page.locator(".row[data-kind=item]").count() == 3
    opened.page.locator(".row[data-kind=item]", has_text="bad").click()
    assert "the model refuses" in opened.text("#details")
    opened.page.locator(".row[data-kind=item]").nth(2).click()
    assert "<script>alert('hi')</script>" in opened.text("#details")
    opened.page.select_option("#status-filter", "error")
    assert opened.page.locator(".row[data-kind=item]").count() == 1
    assert_not_blank(opened)
    opened.check_clean()

    with out.open("a", encoding="utf-8") as file:
        file.write('{"id": "torn", "line": 9, "sta')  # a kill mid-write
    again = invoke("report", str(out))
    assert again.exit_code == 0, again.output
    rebuilt = out.with_suffix(".html")
    assert [i["id"] for i in page_data(rebuilt)["items"]] == [1, "bad", 3]
    opened = open_page(rebuilt)
    opened.check_clean()
    assert "line 4: a torn last line (cut mid-write)" in opened.text("#skipped")


def test_runner_report_reads_a_transcript_and_an_eval_json_and_refuses_other_files(
    invoke: Callable[..., Any], tmp_path: Path
) -> None:
    from tests.report import transcripts as tr

    source = tr.write(tmp_path / "s.jsonl", [tr.header(), *tr.one_turn()])
    assert invoke("report", str(source), "-o", str(tmp_path / "s.html")).exit_code == 0
    assert page_data(tmp_path / "s.html")["kind"] == "session"
    report = {"agent": "geo", "path": "a.yaml", "revision": None, "judge": None, "seconds": 1.0, "cases": []}
    (tmp_path / "e.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    assert invoke("report", str(tmp_path / "e.json")).exit_code == 0
    assert page_data(tmp_path / "e.html")["kind"] == "eval"
    (tmp_path / "x.txt").write_text("hello\n", encoding="utf-8")
    refused = invoke("report", str(tmp_path / "x.txt"))
    assert (
        refused.exit_code == 2 and "not a transcript, a batch output file or an eval report" in refused.output
    )
    missing = invoke("report", str(tmp_path / "nope.jsonl"))
    assert missing.exit_code == 2 and "no file" in missing.output
    printed = invoke("report", str(source), "-o", "-")
    assert printed.output.startswith("<!doctype html>")
