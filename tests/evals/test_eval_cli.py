"""`runner eval` end to end: the installed command, one scripted server on 127.0.0.1 playing both
the agent's model and the judge (its script tells them apart by the model each request names)."""

from __future__ import annotations

import json
import subprocess
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from runner.evals.stats import wilson
from tests.cli_run.conftest import Cli, write_agent

TOOLS = '''
def lookup(city: str) -> str:
    """The capital's country."""
    return "France" if city == "Paris" else "unknown"
'''


def last_user(body: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def agent_yaml(base_url: str, *, system: str = "You answer.", cases: str, judge: bool = True) -> str:
    text = (
        "version: 1\nname: geo\nmodel:\n  id: openai/agent\n"
        f"  api_base: {base_url}\n  api_key: ${{TEST_API_KEY:-sk-none}}\n  retries: 0\n"
        f"prompts:\n  system: {system}\ntools:\n  - python: tools_mod\n"
    )
    if judge:
        text += "judge:\n  id: openai/judge\n"
        text += f"  api_base: {base_url}\n  api_key: ${{TEST_API_KEY:-sk-none}}\n  retries: 0\n"
    return text + cases


CASES = """evals:
  - name: capital
    input: capital of France
    repeat: 10
    expect:
      output_contains: Paris
      tools_called: [lookup]
  - name: polite
    input: greet me
    repeat: 4
    expect:
      judge: The answer is polite.
"""


class Script:
    """The agent: calls `lookup` then answers; 7 of 10 capital answers say Paris, 2 of 4 greetings
    are polite. The judge: passes polite answers, and answers ``judge_text`` when one is given."""

    def __init__(self, judge_text: str | None = None) -> None:
        self.lock = threading.Lock()
        self.count: Counter[str] = Counter()
        self.judge_text = judge_text
        self.judged: list[str] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if body["model"].endswith("judge"):
            return self.judge(body)
        prompt, last = last_user(body), body["messages"][-1]
        if prompt.startswith("capital"):
            if last["role"] != "tool":
                return {"tool_calls": [{"name": "lookup", "arguments": {"city": "Paris"}}]}
            with self.lock:
                self.count["capital"] += 1
                n = self.count["capital"]
            return {"content": "Paris." if n <= 7 else "Lyon, I think."}
        with self.lock:
            self.count["greet"] += 1
            n = self.count["greet"]
        return {"content": "Hello, pleased to meet you!" if n % 2 else "What do you want."}

    def judge(self, body: dict[str, Any]) -> dict[str, Any]:
        text = body["messages"][-1]["content"]
        answer = text.split("<answer>")[1].split("</answer>")[0].strip()
        with self.lock:
            self.judged.append(answer)
        if self.judge_text is not None:
            return {"content": self.judge_text}
        verdict = "pass" if "pleased" in answer else "fail"
        return {"content": json.dumps({"verdict": verdict, "reason": f"the answer is {verdict}"})}


def _json(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.stdout.strip(), result.stderr
    return json.loads(result.stdout)


def test_pass_rates_wilson_intervals_tokens_and_judge_verdicts(cli: Cli, serve: Any, tmp_path: Path) -> None:
    script = Script()
    server = serve(script)
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url, cases=CASES), tools=TOOLS)
    result = cli("eval", str(agent), "--concurrency", "3", "--json")
    assert result.returncode == 1, result.stderr  # the cases pass less than always
    report = _json(result)
    capital, polite = report["cases"]
    assert (capital["name"], capital["runs"], capital["passes"], capital["failures"], capital["errors"]) == (
        "capital",
        10,
        7,
        3,
        0,
    )
    assert capital["pass_rate"] == 0.7
    assert capital["ci95"] == [0.3968, 0.8922]  # the Wilson interval of 7 of 10
    assert capital["problems"] == [{"problem": "the output does not contain 'Paris'", "runs": 3}]
    assert capital["tokens"] > 0 and capital["seconds"] > 0 and capital["judge_tokens"] == 0
    assert (polite["runs"], polite["passes"], polite["failures"], polite["errors"]) == (4, 2, 2, 0)
    assert polite["ci95"] == [round(x, 4) for x in wilson(2, 4)]
    assert polite["judge_tokens"] > 0
    assert polite["problems"] == [{"problem": "the judge: the answer is fail", "runs": 2}]
    assert len(script.judged) == 4 and report["judge"] == "openai/judge" and report["exit_code"] == 1
    # the deterministic checks fail the capital runs before any judge is asked; the rubric is sent
    judge_requests = [b for b in server.requests if b["model"].endswith("judge")]
    assert all("The answer is polite." in b["messages"][-1]["content"] for b in judge_requests)


def test_the_table_and_exit_0_when_every_case_passes(cli: Cli, serve: Any, tmp_path: Path) -> None:
    cases = CASES.replace("repeat: 10", "repeat: 5").replace("repeat: 4\n", "repeat: 1\n")
    server = serve(Script())
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url, cases=cases), tools=TOOLS)
    result = cli("eval", str(agent))
    assert result.returncode == 0, result.stdout + result.stderr
    header, columns, capital, polite = result.stdout.splitlines()[:4]
    assert header.startswith("geo (a/agent.yaml), judge: openai/judge")
    assert columns.split() == [
        "case",
        "runs",
        "pass",
        "fail",
        "error",
        "rate",
        "95%",
        "CI",
        "tokens",
        "cost",
        "time",
    ]
    assert capital.split()[:7] == ["capital", "5", "5", "0", "0", "100%", "57%-100%"]
    assert polite.split()[:6] == ["polite", "1", "1", "0", "0", "100%"]


def test_an_unparseable_judge_answer_is_an_error_apart_from_failures(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve(Script(judge_text="Looks polite enough to me!"))
    agent = write_agent(tmp_path / "a", agent_yaml(server.base_url, cases=CASES), tools=TOOLS)
    result = cli("eval", str(agent), "--json", "--repeat", "3")
    assert result.returncode == 1
    capital, polite = _json(result)["cases"]
    assert (capital["runs"], capital["passes"], capital["failures"], capital["errors"]) == (3, 3, 0, 0)
    assert (polite["runs"], polite["passes"], polite["failures"], polite["errors"]) == (3, 0, 0, 3)
    assert polite["pass_rate"] is None  # errors do not count as failures
    (problem,) = polite["problems"]
    assert problem["runs"] == 3
    assert problem["problem"].startswith('the judge did not answer {"verdict": "pass"|"fail", "reason": ...}')
    assert "Looks polite enough to me!" in problem["problem"]
    table = cli("eval", str(agent), "--repeat", "1")
    assert table.returncode == 1
    assert table.stdout.splitlines()[3].split()[:6] == ["polite", "1", "0", "0", "1", "-"]


def _git(folder: Path, *args: str) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(folder), *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def _commit(repo: Path, agent: Path, body: str, message: str) -> None:
    agent.write_text(body, encoding="utf-8")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", message)


def _versioned(body: dict[str, Any]) -> dict[str, Any]:
    """The agent answers right under the v1 prompt, wrong under v2 (the regression); no tools."""
    system = body["messages"][0]["content"]
    prompt = last_user(body)
    if prompt.startswith("capital"):
        return {"content": "Paris." if "v1" in system else "Lyon."}
    return {"content": "Done."}


TWO_CASES = """evals:
  - name: capital
    input: capital of France
    repeat: 10
    expect: {output_contains: Paris}
  - name: {other}
    input: anything
    expect: {output_contains: Done}
"""


def test_against_a_revision_reports_a_significant_regression_and_exits_1(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve(_versioned)
    repo = tmp_path / "repo"
    agent = write_agent(repo / "agents", "", tools=TOOLS)
    _git(repo, "init", "-q")
    # as in any Python repository: importing the work tree's tool module writes its bytecode there
    (repo / ".gitignore").write_text("__pycache__/\n", encoding="utf-8")
    old = agent_yaml(
        server.base_url,
        system="You answer (v1).",
        cases=TWO_CASES.replace("{other}", "old_only"),
        judge=False,
    )
    _commit(repo, agent, old, "v1")
    new = agent_yaml(
        server.base_url,
        system="You answer (v2).",
        cases=TWO_CASES.replace("{other}", "new_only"),
        judge=False,
    )
    _commit(repo, agent, new, "v2")
    status = _git(repo, "status", "--porcelain")

    result = cli("eval", str(agent), "--against", "HEAD~1", "--json")
    assert result.returncode == 1, result.stderr
    report = _json(result)
    assert report["cases"][0]["passes"] == 0 and report["against"]["cases"][0]["passes"] == 10
    assert report["against"]["revision"].startswith("HEAD~1 (")
    comparison = report["against"]["comparison"]
    (change,) = comparison["cases"]
    assert change["name"] == "capital" and change["before"] == 1.0 and change["after"] == 0.0
    assert change["delta"] == -1.0 and change["significant"] and change["regression"]
    assert change["p_value"] == round(2 / 184756, 6)  # Fisher's exact test of 10/10 against 0/10
    assert comparison["only_now"] == ["new_only"] and comparison["only_before"] == ["old_only"]
    assert comparison["test"] == "fisher-exact-two-sided" and comparison["alpha"] == 0.05
    assert _git(repo, "status", "--porcelain") == status  # the work tree and the index are untouched

    table = cli("eval", str(agent), "--against", "HEAD~1")
    assert table.returncode == 1
    assert "significant regression: capital" in table.stdout
    assert "only now (not compared): new_only" in table.stdout
    assert "only at HEAD~1 (" in table.stdout and "old_only" in table.stdout


def test_against_the_same_revision_is_no_significant_change(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve(_versioned)
    repo = tmp_path / "repo"
    agent = write_agent(repo, "", tools=TOOLS)
    _git(repo, "init", "-q")
    cases = TWO_CASES.replace("{other}", "done").replace("repeat: 10", "repeat: 3")
    _commit(repo, agent, agent_yaml(server.base_url, system="v1", cases=cases, judge=False), "v1")
    result = cli("eval", str(agent), "--against", "HEAD", "--json")
    assert result.returncode == 0, result.stderr
    changes = _json(result)["against"]["comparison"]["cases"]
    assert [(c["name"], c["verdict"], c["p_value"]) for c in changes] == [
        ("capital", "no significant change", 1.0),
        ("done", "no significant change", 1.0),
    ]


def test_bad_input_is_refused_with_exit_2(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve(_versioned)
    repo = tmp_path / "repo"
    agent = write_agent(repo, "", tools=TOOLS)
    _git(repo, "init", "-q")
    _commit(repo, agent, agent_yaml(server.base_url, cases=CASES, judge=False), "one")
    no_judge = cli("eval", str(agent))
    assert no_judge.returncode == 2
    assert "case 'polite' has expect.judge, but no judge model is named" in no_judge.stderr
    assert "--judge MODEL" in no_judge.stderr
    missing = cli("eval", str(agent), "--judge", "openai/judge", "--against", "no-such-branch")
    assert (
        missing.returncode == 2 and "--against no-such-branch: no revision 'no-such-branch'" in missing.stderr
    )
    outside = write_agent(tmp_path / "loose", agent_yaml(server.base_url, cases=CASES), tools=TOOLS)
    refused = cli(
        "eval", str(outside), "--against", "HEAD", extra_env={"GIT_CEILING_DIRECTORIES": str(tmp_path)}
    )
    assert refused.returncode == 2 and "is not in one" in refused.stderr
    _git(repo, "mv", "agent.yaml", "renamed.yaml")
    _git(repo, "commit", "-q", "-m", "rename")
    gone = cli("eval", str(repo / "renamed.yaml"), "--judge", "openai/judge", "--against", "HEAD~1")
    assert gone.returncode == 2 and "'renamed.yaml' does not exist at revision 'HEAD~1'" in gone.stderr
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)
    cut = cli("eval", str(shallow / "renamed.yaml"), "--judge", "openai/judge", "--against", "HEAD~1")
    assert cut.returncode == 2 and "--against HEAD~1: no revision 'HEAD~1'" in cut.stderr
    assert "shallow clone" in cut.stderr
    empty = write_agent(tmp_path / "empty", agent_yaml(server.base_url, cases=""), tools=TOOLS)
    none = cli("eval", str(empty))
    assert none.returncode == 2 and "has no evals: and no tests: to run" in none.stderr
    assert cli("eval", str(agent), "--repeat", "0").returncode == 2
    assert server.requests == []  # nothing ran


def test_min_pass_rate_sets_the_bar_and_a_failed_run_is_an_error(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    def fresh() -> Path:
        server = serve(Script())
        return write_agent(tmp_path / "a", agent_yaml(server.base_url, cases=CASES), tools=TOOLS)

    assert cli("eval", str(fresh()), "--min-pass-rate", "0.5").returncode == 0  # 70% and 50%
    assert cli("eval", str(fresh()), "--min-pass-rate", "0.6").returncode == 1  # polite: 50%
    assert cli("eval", str(fresh()), "--min-pass-rate", "1.5").returncode == 2

    def broken(body: dict[str, Any]) -> dict[str, Any]:
        return {"status": 400, "error": "the model refuses"}

    server = serve(broken)
    agent = write_agent(tmp_path / "b", agent_yaml(server.base_url, cases=CASES), tools=TOOLS)
    result = cli("eval", str(agent), "--repeat", "2", "--min-pass-rate", "0", "--json")
    assert result.returncode == 1  # errors are never all good
    for case in _json(result)["cases"]:
        assert (case["runs"], case["passes"], case["failures"], case["errors"]) == (2, 0, 0, 2)
        (problem,) = case["problems"]
        assert problem["problem"].startswith("the run failed:") and "the model refuses" in problem["problem"]


def test_a_judge_that_cannot_be_reached_makes_errors(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve(Script())
    body = agent_yaml(server.base_url, cases=CASES).replace(
        f"judge:\n  id: openai/judge\n  api_base: {server.base_url}",
        "judge:\n  id: openai/judge\n  api_base: http://127.0.0.1:9/v1",
    )
    agent = write_agent(tmp_path / "a", body, tools=TOOLS)
    result = cli("eval", str(agent), "--repeat", "2", "--json")
    assert result.returncode == 1
    capital, polite = _json(result)["cases"]
    assert capital["errors"] == 0 and (polite["errors"], polite["failures"], polite["passes"]) == (2, 0, 0)
    assert polite["problems"][0]["problem"].startswith("the judge failed:")


BLOCKING_TOOLS = '''
def lookup(city: str) -> str:
    """The capital's country (once the test lets it: it reads the named pipe RELEASE first)."""
    with open(RELEASE) as pipe:
        pipe.read()
    return "France"
'''


def test_progress_shows_each_run_as_it_is_graded(cli: Cli, serve: Any, tmp_path: Path) -> None:
    # issue 23 item 17: a blank screen until the table; each run's tool blocks until the test lets it
    import os

    release = tmp_path / "release"
    os.mkfifo(release)
    server = serve(
        [{"tool_calls": [{"name": "lookup", "arguments": {"city": "Paris"}}]}, {"content": "Paris"}],
        repeat=True,
    )
    cases = (
        "evals:\n  - name: capital\n    input: capital of France\n    repeat: 2\n"
        "    expect:\n      output_contains: Paris\n"
    )
    agent = write_agent(
        tmp_path / "a",
        agent_yaml(server.base_url, cases=cases, judge=False),
        tools=f"RELEASE = {str(release)!r}\n" + BLOCKING_TOOLS,
    )
    process = cli.popen("eval", str(agent), "--concurrency", "1")
    assert process.stderr is not None and process.stdout is not None
    try:
        assert process.stderr.readline() == "eval geo: 2 runs of 1 case, 1 at a time\n"  # the first run waits
        release.write_text("go")  # opens once the first run's tool reads the pipe
        assert process.stderr.readline().startswith("  1/2 capital#")  # while the second run waits
        release.write_text("go")
        assert process.stderr.readline().startswith("  2/2 capital#")
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert process.stdout.read().startswith("geo (a/agent.yaml), judge: none")
