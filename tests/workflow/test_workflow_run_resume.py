"""Failing steps, budgets, Ctrl+C and resume of a workflow (issue 17)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from runner.testing import ScriptedServer
from tests.workflow.helpers import Cli, Models, events, team, user_text

THREE = """workflow:
  - {id: one, agent: echo, input: "one"}
  - {id: two, agent: flaky, input: "two after {{ steps.one.output }}"}
  - {id: three, agent: echo, input: "three after {{ steps.two.output }}"}
"""


def test_a_failing_step_stops_the_workflow_and_resume_reruns_only_what_did_not_finish(
    cli: Cli, tmp_path: Path
) -> None:
    broken = {"on": True}

    def flaky(body: dict) -> dict | str:
        if broken["on"]:
            return {"status": 400, "error": "the flaky model is down"}
        return "fixed " + user_text(body)

    models = Models({"echo": lambda body: user_text(body).upper(), "flaky": flaky})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"echo": "", "flaky": ""}, THREE)
        failed = cli("run", str(path), "-p", "go")
        assert failed.returncode == 1, failed.stderr
        assert "step two failed" in failed.stderr and "the flaky model is down" in failed.stderr
        assert models.calls == {"echo": 1, "flaky": 1}
        record = cli.workflow_transcript()
        broken["on"] = False
        resumed = cli("resume", record.stem)
    assert resumed.returncode == 0, resumed.stderr
    # step one was not run again: its recorded output fed step two
    assert models.calls == {"echo": 2, "flaky": 2}
    assert resumed.stdout.strip() == "THREE AFTER FIXED TWO AFTER ONE"
    assert "[one] done earlier" in resumed.stderr
    assert cli.workflow_transcript() == record  # the same transcript goes on
    assert [e["status"] for e in events(record, "workflow_end")] == ["error", "ok"]


def test_b_a_failing_step_with_on_error_continue_is_seen_by_later_steps(cli: Cli, tmp_path: Path) -> None:
    body = THREE.replace('input: "two after {{ steps.one.output }}"}', "on_error: continue}").replace(
        "{{ steps.two.output }}", "{{ steps.two.status }}"
    )
    models = Models(
        {"echo": lambda body: user_text(body), "flaky": lambda body: {"status": 400, "error": "down"}}
    )
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"echo": "", "flaky": ""}, body)
        done = cli("run", str(path), "-p", "go")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "three after error"
    two = next(e for e in events(cli.workflow_transcript(), "step_end") if e["key"] == "two")
    assert two["status"] == "error" and "down" in two["error"]


FAN_OUT = """workflow:
  limits: {max_tokens: 50}
  steps:
    - id: each
      for_each: "[1, 2, 3, 4, 5, 6, 7, 8]"
      max_parallel: 1
      step: {id: one, agent: echo, input: "item {{ item }}"}
"""


def test_c_a_budget_spent_mid_fan_out_starts_no_more_items_and_exits_3(cli: Cli, tmp_path: Path) -> None:
    models = Models({"echo": lambda body: user_text(body)})  # 20 tokens a call
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"echo": ""}, FAN_OUT)
        done = cli("run", str(path), "-p", "go")
    assert done.returncode == 3, done.stderr
    assert models.calls == {"echo": 3}  # 20, 40, 60 >= 50: items 4 to 8 never start
    assert "limits.max_tokens" in done.stderr and "did not start" in done.stderr
    started = [e["key"] for e in events(cli.workflow_transcript(), "step_start") if e["kind"] == "agent"]
    assert started == ["each[0]/one", "each[1]/one", "each[2]/one"]


PARALLEL_SLOW = """workflow:
  - id: all
    parallel:
      - {id: a, agent: slow, input: "a"}
      - {id: b, agent: slow, input: "b"}
      - {id: c, agent: quick, input: "c"}
  - {id: last, agent: quick, input: "{{ steps.a.output }}{{ steps.b.output }}{{ steps.c.output }}"}
"""


def _wait_for(predicate, timeout: float = 20) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _step_ended(cli: Cli, key: str) -> bool:
    try:
        return any(e["key"] == key for e in events(cli.workflow_transcript(), "step_end"))
    except (ValueError, IndexError, json.JSONDecodeError):  # no workflow transcript yet, or a torn line
        return False


def test_d_ctrl_c_during_a_parallel_step_ends_every_child_cleanly_and_resume_finishes(
    cli: Cli, tmp_path: Path
) -> None:
    slow = {"delay": 30.0}

    def slow_answer(body: dict) -> dict:
        return {"content": user_text(body) * 2, "delay_s": slow["delay"]}

    models = Models({"slow": slow_answer, "quick": lambda body: "q" + user_text(body)})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"slow": "", "quick": ""}, PARALLEL_SLOW)
        process = cli.popen("run", str(path), "-p", "go")
        _wait_for(lambda: models.calls.get("slow", 0) == 2 and models.calls.get("quick", 0) == 1)
        _wait_for(lambda: _step_ended(cli, "all/c"))  # the quick step is recorded as done
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=30)
        assert process.returncode == 130, err
        assert "Traceback" not in err
        record = cli.workflow_transcript()
        ends = {e["key"]: e for e in events(record, "step_end")}
        assert ends["all/a"]["status"] == ends["all/b"]["status"] == "interrupted"
        assert ends["all/c"]["status"] == "ok"
        for key in ("all/a", "all/b"):  # each child session recorded its interrupt and closed
            child = cli.home / "sessions" / f"{ends[key]['session_id']}.jsonl"
            names = [json.loads(line).get("event") for line in child.read_text().splitlines()]
            assert names[-2:] == ["interrupt", "turn_end"], names
        assert "last" not in ends
        assert [e["status"] for e in events(record, "workflow_end")] == ["interrupted"]
        slow["delay"] = 0.0
        resumed = cli("resume", record.stem)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "qaabbqc"
    assert models.calls == {"slow": 4, "quick": 2}  # c was not run again


def test_e_a_workflow_killed_with_sigkill_resumes_from_its_last_finished_step(
    cli: Cli, tmp_path: Path
) -> None:
    slow = {"delay": 30.0}

    def two(body: dict) -> dict:
        return {"content": "second", "delay_s": slow["delay"]}

    models = Models({"echo": lambda body: user_text(body).upper(), "flaky": two})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"echo": "", "flaky": ""}, THREE)
        process = cli.popen("run", str(path), "-p", "go")
        _wait_for(lambda: models.calls.get("flaky", 0) == 1)
        os.kill(process.pid, signal.SIGKILL)
        process.communicate(timeout=30)
        killed = cli("sessions", "list").stdout
        slow["delay"] = 0.0
        resumed = cli("resume", cli.workflow_transcript().stem)
        listed = cli("sessions", "list").stdout
    stem = cli.workflow_transcript().stem
    assert [x.split()[1] for x in killed.splitlines() if x.startswith(stem)] == ["interrupted"]
    assert [x.split()[1] for x in listed.splitlines() if x.startswith(stem)] == ["done"]
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "THREE AFTER SECOND"
    assert models.calls == {"echo": 2, "flaky": 2}


def test_f_max_steps_of_the_workflow_stops_a_fan_out_with_exit_3(cli: Cli, tmp_path: Path) -> None:
    models = Models({"echo": lambda body: user_text(body)})
    with ScriptedServer(models) as server:
        body = FAN_OUT.replace("{max_tokens: 50}", "{max_steps: 2}").replace(
            "max_parallel: 1", "max_parallel: 3"
        )
        path = team(tmp_path, server.base_url, {"echo": ""}, body)
        done = cli("run", str(path), "-p", "go")
    assert done.returncode == 3, done.stderr
    assert models.calls == {"echo": 2} and "limits.max_steps" in done.stderr


def test_g_a_reference_to_a_step_that_runs_later_is_refused_before_anything_runs(
    cli: Cli, tmp_path: Path
) -> None:
    body = """workflow:
  - {id: first, agent: echo, input: "{{ steps.second.output }}"}
  - {id: second, agent: echo}
"""
    models = Models({"echo": lambda body: user_text(body)})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"echo": ""}, body)
        done = cli("run", str(path), "-p", "go")
    assert done.returncode == 2
    assert "workflow[0].input: steps.second runs later: its output is not ready here" in done.stderr
    assert "Traceback" not in done.stderr
    assert models.calls == {}


def test_h_resume_after_the_team_file_changed_warns_and_keeps_recorded_outputs(
    cli: Cli, tmp_path: Path
) -> None:
    broken = {"on": True}

    def flaky(body: dict) -> dict | str:
        return {"status": 400, "error": "down"} if broken["on"] else "up"

    models = Models({"echo": lambda body: user_text(body), "flaky": flaky})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"echo": "", "flaky": ""}, THREE)
        assert cli("run", str(path), "-p", "go").returncode == 1
        path.write_text(path.read_text() + "# edited\n")
        broken["on"] = False
        resumed = cli("resume", cli.workflow_transcript().stem)
    assert resumed.returncode == 0, resumed.stderr
    assert "changed since workflow" in resumed.stderr
    assert models.calls == {"echo": 2, "flaky": 2}


def test_i_a_workflow_resumes_on_its_own_input_and_sessions_list_shows_it(cli: Cli, tmp_path: Path) -> None:
    models = Models(
        {"echo": lambda body: user_text(body), "flaky": lambda body: {"status": 400, "error": "x"}}
    )
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"echo": "", "flaky": ""}, THREE)
        assert cli("run", str(path), "-p", "go").returncode == 1
        record = cli.workflow_transcript()
        refused = cli("resume", record.stem, "-p", "other input")
        listed = cli("sessions", "list")
    assert refused.returncode == 2 and "resumes on the input it began with" in refused.stderr
    assert models.calls == {"echo": 1, "flaky": 1}
    assert listed.returncode == 0 and record.stem in listed.stdout
    (line,) = [x for x in listed.stdout.splitlines() if x.startswith(record.stem)]
    assert line.split()[1:3] == ["failed", "team"] and line.endswith("2 steps go")  # two agent steps ran


def test_j_resume_after_a_finished_parallel_step_still_sees_its_sub_steps(cli: Cli, tmp_path: Path) -> None:
    broken = {"on": True}

    def last(body: dict) -> dict | str:
        return {"status": 400, "error": "down"} if broken["on"] else "last " + user_text(body)

    body = PARALLEL_SLOW.replace("{id: last, agent: quick,", "{id: last, agent: flaky,")
    models = Models({"slow": lambda body: user_text(body) * 2, "quick": lambda body: "q", "flaky": last})
    with ScriptedServer(models) as server:
        path = team(tmp_path, server.base_url, {"slow": "", "quick": "", "flaky": ""}, body)
        assert cli("run", str(path), "-p", "go").returncode == 1
        broken["on"] = False
        resumed = cli("resume", cli.workflow_transcript().stem)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "last aabbq"
    assert models.calls == {"slow": 2, "quick": 1, "flaky": 2}


LOOPING_TOOL = '''
def ping(n: int) -> str:
    """Answer pong."""
    return "pong"
'''

PARALLEL_SPENDERS = """workflow:
  limits: {max_tokens: 100}
  steps:
    - id: all
      parallel:
        - {id: a, agent: spender, input: "a"}
        - {id: b, agent: spender, input: "b"}
        - {id: c, agent: spender, input: "c"}
"""


def test_k_steps_running_at_once_share_the_budget_and_stop_once_it_is_spent(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "ping_tools.py").write_text(LOOPING_TOOL, encoding="utf-8")

    # every reply calls the tool again, 20 tokens a call: each step alone would go on to its own
    # limits (max_steps 50); together they may spend the workflow's 100 tokens, then each stops
    def spend(body: dict[str, Any]) -> dict[str, Any]:  # new arguments each time: no repeat guard
        call = {"name": "ping", "arguments": {"n": len(body["messages"])}}
        return {"sleep_s": 0.05, "tool_calls": [call]}

    models = Models({"spender": spend})
    with ScriptedServer(models) as server:
        path = team(
            tmp_path,
            server.base_url,
            {"spender": "tools:\n  - python: ping_tools\nlimits: {max_steps: 50}"},
            PARALLEL_SPENDERS,
        )
        done = cli("run", str(path), "-p", "go")
    assert done.returncode == 3, done.stderr
    assert "max_tokens" in done.stderr
    calls = models.calls["spender"]
    # 100 tokens are 5 calls; each of the three running steps may have one more call in flight
    assert 5 <= calls <= 5 + 3, calls
    (end,) = events(cli.workflow_transcript(), "workflow_end")
    assert end["status"] == "limit" and end["tokens"] <= 100 + 3 * 20
