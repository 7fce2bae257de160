"""`runner sessions show --html`: a session's timeline, opened in headless Chromium as a person would."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runner.report import session_page, write_page
from tests.report import transcripts as tr
from tests.report.conftest import Opened, assert_not_blank, page_data

# the module's browser is started once: all its tests on one worker (xdist loadgroup)
pytestmark = pytest.mark.xdist_group("pages-session")

AGENT = """\
version: 1
name: calc
model:
  id: openai/scripted
  api_base: {base}
  api_key: ${{TEST_API_KEY:-sk-none}}
  retries: 0
prompts:
  system: You add.
tools:
  - python: calc_tools
"""
TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


def _agent(folder: Path, base_url: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "calc_tools.py").write_text(TOOLS, encoding="utf-8")
    path = folder / "agent.yaml"
    path.write_text(AGENT.format(base=base_url), encoding="utf-8")
    return path


def test_a_real_run_shown_as_a_timeline_of_its_model_and_tool_calls(
    invoke: Callable[..., Any], scripted_server: Any, open_page: Callable[[Path], Opened], tmp_path: Path
) -> None:
    cached = {"prompt_tokens": 200, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 128}}
    server = scripted_server(
        [
            {
                "tool_calls": [
                    {"name": "add", "arguments": {"a": 1, "b": 2}},
                    {"name": "add", "arguments": {"a": 3, "b": 4}},
                ],
                "response_id": "chatcmpl-first",
            },
            {"content": "The sums are 3 and 7.", "response_id": "chatcmpl-second", "usage": cached},
        ]
    )
    agent = _agent(tmp_path / "a", server.base_url)
    ran = invoke("run", str(agent), "-p", "add 1+2 and 3+4")
    assert ran.exit_code == 0, ran.output
    page = tmp_path / "out" / "page.html"
    shown = invoke("sessions", "show", "--html", "-o", str(page))  # no id: the newest session
    assert shown.exit_code == 0, shown.output
    assert "wrote" in shown.output and page.is_file()

    opened = open_page(page)
    opened.check_clean()
    assert opened.text("[data-total='status'] b") == "done"
    assert opened.text("[data-total='steps'] b") == "2"
    assert opened.text("[data-total='tool calls'] b") == "2"
    assert "The sums are 3 and 7." in opened.text("#final-answer")
    rows = opened.page.locator(".row")
    kinds = [rows.nth(i).get_attribute("data-kind") for i in range(rows.count())]
    assert kinds == ["turn", "model", "tool", "tool", "model", "answer"]
    labels = opened.page.locator(".row[data-kind=tool] .label").all_text_contents()
    assert labels == ["add  ∥ 1/2", "add  ∥ 2/2"]  # two calls of one reply: side by side
    opened.page.locator(".row[data-kind=tool]").nth(1).click()
    details = opened.text("#details")
    assert '"a": 3' in details and "7" in details and "call id" in details
    assert (
        opened.text("[data-total='cached tokens in'] b") == "128"
    )  # the provider's usage, via the transcript
    opened.page.locator(".row[data-kind=model]").nth(1).click()
    assert "first token" in opened.text("#details") and "not recorded" not in opened.text("#details")
    assert "response idchatcmpl-second" in opened.text("#details")
    assert "cached tokens in128" in opened.text("#details")
    opened.page.locator(".row[data-kind=model]").nth(0).click()
    assert "response idchatcmpl-first" in opened.text("#details")
    assert "cached" not in opened.text("#details")  # the first answer read nothing from the cache
    assert_not_blank(opened)
    opened.check_clean()


def test_figures_of_each_call_come_from_the_transcript(
    open_page: Callable[[Path], Opened], tmp_path: Path
) -> None:
    source = tr.write(tmp_path / "s.jsonl", [tr.header(), *tr.one_turn()])
    page = tmp_path / "s.html"
    write_page(page, session_page(source))
    data = page_data(page)
    model = [r for r in data["rows"] if r["k"] == "model"]
    assert [(m["s"], m["e"], m["in"], m["out"]) for m in model] == [
        (2.0, 402.0, 120, 30),
        (700.0, 1500.0, 160, 12),
    ]
    assert model[1]["ft"] == 300.0 and "ft" not in model[0]
    tools = [r for r in data["rows"] if r["k"] == "tool"]
    assert [(t["s"], t["e"], t.get("err", False)) for t in tools] == [
        (450.0, 650.0, False),
        (450.0, 700.0, True),
    ]
    assert data["totals"]["cost_usd"] == 0.002 and data["totals"]["errors"] == 1

    opened = open_page(page)
    opened.check_clean()
    assert opened.text("[data-total='tokens in'] b") == "280"
    assert opened.text("[data-total='cost'] b") == "$0.0020"
    assert opened.page.locator(".bar.tool.err").count() == 1
    opened.page.locator(".row[data-kind=model]").nth(1).click()
    assert "300 ms" in opened.text("#details") and "800 ms" in opened.text("#details")
    opened.page.check("#problems-only")
    assert opened.page.locator(".row").count() == 1  # only the failed tool call
    opened.check_clean()


def test_each_model_call_shows_its_response_id_and_cached_tokens_and_the_totals_sum_them(
    open_page: Callable[[Path], Opened], tmp_path: Path
) -> None:
    records = [tr.header(), *tr.one_turn()]
    records[3].update(usage=tr.usage(120, 30, 0.0012, cached=64), response_id="chatcmpl-one")
    records[6].update(usage=tr.usage(160, 12, 0.0008, cached=1_500), response_id="chatcmpl-two")
    page = tmp_path / "c.html"
    write_page(page, session_page(tr.write(tmp_path / "c.jsonl", records)))
    data = page_data(page)
    model = [r for r in data["rows"] if r["k"] == "model"]
    assert [(m["rid"], m["cached"]) for m in model] == [("chatcmpl-one", 64), ("chatcmpl-two", 1_500)]
    assert data["totals"]["cached_in"] == 1_564

    opened = open_page(page)
    opened.check_clean()
    assert opened.text("[data-total='cached tokens in'] b") == "1,564"
    assert opened.text("[data-total='tokens in'] b") == "280"  # cached tokens are part of them
    figures = opened.page.locator(".row[data-kind=model] .figure").all_text_contents()
    assert "120→30 tok (64 cached)" in figures[0] and "160→12 tok (1,500 cached)" in figures[1]
    opened.page.locator(".row[data-kind=model]").nth(1).click()
    pairs = opened.page.locator("#details dl.kv").evaluate(
        "dl => [...dl.querySelectorAll('dt')].map(dt => [dt.textContent, dt.nextElementSibling.textContent])"
    )
    assert ["response id", "chatcmpl-two"] in pairs and ["cached tokens in", "1,500"] in pairs
    opened.check_clean()


def test_without_response_ids_or_cached_tokens_the_page_shows_no_empty_field(
    open_page: Callable[[Path], Opened], tmp_path: Path
) -> None:
    page = tmp_path / "n.html"
    write_page(page, session_page(tr.write(tmp_path / "n.jsonl", [tr.header(), *tr.one_turn()])))
    data = page_data(page)
    assert all("rid" not in r and "cached" not in r for r in data["rows"])
    assert data["totals"]["cached_in"] is None

    opened = open_page(page)
    opened.check_clean()
    totals = opened.page.locator("[data-total]").evaluate_all("ts => ts.map(t => t.dataset.total)")
    assert "tokens in" in totals and "cached tokens in" not in totals
    assert "cached" not in " ".join(opened.page.locator(".row .figure").all_text_contents())
    for index in range(opened.page.locator(".row[data-kind=model]").count()):
        opened.page.locator(".row[data-kind=model]").nth(index).click()
        details = opened.text("#details")
        assert "tokens in" in details  # the details are drawn...
        assert "response id" not in details and "cached" not in details  # ...without the absent fields
        assert "None" not in details and "undefined" not in details and "null" not in details
    opened.check_clean()


def test_hooks_reloads_with_their_diff_limits_and_structured_output(
    open_page: Callable[[Path], Opened], tmp_path: Path
) -> None:
    snapshot = {"model": "scripted", "params": {}, "prompts": {"system": "You add."}, "tools": {}}
    changed = {**snapshot, "prompts": {"system": "You add and multiply."}}
    records = [
        tr.header(),
        tr.event(0, "config", hash="aaaa", snapshot=snapshot),
        *tr.one_turn(),
        tr.event(1600, "reload", changes=["prompts.system"], applies="next turn"),
        tr.event(1700, "config", hash="bbbb", snapshot=changed),
        tr.event(1701, "turn", turn=2, config="bbbb"),
        tr.message(1702, "user", "and now?"),
        tr.event(1703, "hook", hook_event="step_pre", stop=True, reason="a hook said no"),
        tr.event(1704, "limit", reason="limit", note="limits.max_cost_usd reached"),
        tr.event(1705, "output", value={"sum": 10}),
        tr.event(1706, "turn_end", turn=2, reason="limit"),
    ]
    records[6].update(content="Denied by a hook: not on Sundays", is_error=False)  # a tool_pre hook said no
    page = tmp_path / "p.html"
    write_page(page, session_page(tr.write(tmp_path / "s.jsonl", records)))
    opened = open_page(page)
    opened.check_clean()
    opened.page.locator(".row[data-kind=tool]").nth(1).click()
    assert "decisionDenied by a hook" in opened.text("#details")
    assert opened.page.locator(".bar.tool.err").count() == 1
    notes = opened.page.locator(".row[data-kind=note] .label").all_text_contents()
    assert notes == ["reload", "hook: a hook said no", "limit: limits.max_cost_usd reached"]
    opened.page.locator(".row[data-kind=config]").click()
    assert "You add and multiply." in opened.text("#details")  # runner diff's comparison
    assert '"sum": 10' in opened.text("#structured-output")
    opened.page.select_option("#turn-filter", "2")
    assert opened.text("#row-count") == "4 of 12 rows"  # the turn, the hook, the limit, the output
    assert opened.page.locator(".row[data-kind=note].sel, .row .mark.bad").count() == 2
    opened.check_clean()


def test_a_workflow_is_drawn_as_lanes_of_its_steps(
    open_page: Callable[[Path], Opened], tmp_path: Path
) -> None:
    records = [
        tr.header(workflow="research", input="topic"),
        tr.event(0, "step_start", key="plan", id="plan", kind="agent", agent="planner"),
        tr.event(100, "step_end", key="plan", id="plan", kind="agent", status="ok", output="p", tokens=40),
        tr.event(101, "step_start", key="search[0]", id="search", kind="agent", agent="searcher"),
        tr.event(101, "step_start", key="search[1]", id="search", kind="agent", agent="searcher"),
        tr.event(
            300, "step_end", key="search[0]", id="search", kind="agent", status="ok", output="a", tokens=10
        ),
        tr.event(350, "step_end", key="search[1]", id="search", kind="agent", status="error", error="down"),
        tr.event(360, "workflow_end", status="error", exit_code=1, output=None),
    ]
    page = tmp_path / "w.html"
    write_page(page, session_page(tr.write(tmp_path / "w.jsonl", records)))
    opened = open_page(page)
    opened.check_clean()
    labels = opened.page.locator(".row[data-kind=step] .label").all_text_contents()
    assert labels == ["plan (planner)", "search · search[0] (searcher)", "search · search[1] (searcher)"]
    assert opened.text("[data-total='status'] b") == "failed"
    assert opened.page.locator(".bar.step.err").count() == 1
    opened.page.locator(".row[data-kind=step]").nth(2).click()
    assert "down" in opened.text("#details")
    assert_not_blank(opened)


TEAM = """version: 1
agents:
  writer:
    model: {{id: openai/writer, api_base: '{base}', retries: 0}}
  joiner:
    model: {{id: openai/joiner, api_base: '{base}', retries: 0}}
workflow:
  - id: all
    parallel:
      - {{id: a, agent: writer, input: "a"}}
      - {{id: b, agent: writer, input: "b"}}
  - id: join
    agent: joiner
    input: "{{{{ steps.a.output }}}}{{{{ steps.b.output }}}}"
"""


def test_a_real_workflow_run_shown_as_lanes(
    invoke: Callable[..., Any], scripted_server: Any, open_page: Callable[[Path], Opened], tmp_path: Path
) -> None:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        said = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        return {"content": ("joined " if body["model"].endswith("joiner") else "") + said * 2}

    server = scripted_server(answer, repeat=True)
    team = tmp_path / "team.yaml"
    team.write_text(TEAM.format(base=server.base_url), encoding="utf-8")
    ran = invoke("run", str(team), "-p", "go")
    assert ran.exit_code == 0, ran.output
    page = tmp_path / "workflow.html"
    assert invoke("sessions", "show", "--html", "-o", str(page)).exit_code == 0  # the newest: the workflow's
    opened = open_page(page)
    opened.check_clean()
    assert opened.text("h1").startswith("Workflow")
    labels = opened.page.locator(".row[data-kind=step] .label").all_text_contents()
    assert labels == ["all", "a · all/a (writer)", "b · all/b (writer)", "join (joiner)"]
    assert "joined aabb" in opened.text("#structured-output")
    opened.page.locator(".row[data-kind=step]").nth(1).click()
    assert "aa" in opened.text("#details") and "writer" in opened.text("#details")
    assert_not_blank(opened)
