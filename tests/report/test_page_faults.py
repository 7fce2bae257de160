"""The pages against what can go wrong: hostile text, broken and old transcripts, 20,000 steps, secrets."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runner.report import session_page, write_page
from runner.report.page import embed_json
from tests.report import transcripts as tr
from tests.report.conftest import Opened, assert_not_blank, page_data

# the module's browser is started once: all its tests on one worker (xdist loadgroup)
pytestmark = pytest.mark.xdist_group("pages-faults")

HOSTILE = [
    "<script>window.__pwned = 'script'</script>",
    "<img src=x onerror=\"window.__pwned = 'onerror'\">",
    '<a href="javascript:window.__pwned = \'link\'" id="evil">click me</a>',
    "</script><script>window.__pwned = 'closed'</script><!--",
    "<svg onload=\"window.__pwned = 'svg'\"></svg>\u2028"
    "<iframe src=\"javascript:parent.__pwned = 'frame'\"></iframe>",
]


def _hostile_transcript(path: Path) -> Path:
    text = "\n".join(HOSTILE)
    records = [
        tr.header(agent="<b onmouseover=alert(1)>x</b>"),
        *tr.one_turn(text=text, args=({"html": HOSTILE[3]}, {"link": HOSTILE[2]})),
    ]
    records[5]["content"] = HOSTILE[1]  # a tool result
    records[3]["reasoning"] = HOSTILE[4]
    records[3]["response_id"] = HOSTILE[2]  # the provider's id of the answer is its text too
    return tr.write(path, records)


def test_hostile_model_output_and_tool_results_render_as_text(
    open_page: Callable[[Path], Opened], tmp_path: Path
) -> None:
    page = tmp_path / "hostile.html"
    write_page(page, session_page(_hostile_transcript(tmp_path / "h.jsonl")))
    raw = page.read_text(encoding="utf-8")
    assert raw.count("</script>") == 2 and raw.count("<script") == 2  # the data block and the page's code
    assert "<!--" not in raw
    assert "\u2028" not in raw
    assert "<img" not in raw and "<iframe" not in raw  # every < of the data is written \u003c

    opened = open_page(page)
    assert HOSTILE[0] in opened.text("#final-answer") and HOSTILE[3] in opened.text("#final-answer")
    for index in range(opened.page.locator(".row").count()):  # every row's details drawn once
        opened.page.locator(".row").nth(index).click()
        if opened.page.locator(".row").nth(index).get_attribute("data-kind") == "tool":
            assert "<" in opened.text("#details")
    opened.page.locator(".row[data-kind=tool]").nth(1).click()
    assert HOSTILE[1] in opened.text("#details")  # the result, as text
    opened.page.locator(".row[data-kind=model]").nth(0).click()
    assert HOSTILE[4].replace("\u2028", "") in opened.text("#details").replace(
        "\u2028", ""
    )  # the reasoning, as text
    assert "response id" + HOSTILE[2] in opened.text("#details")
    elements = opened.page.evaluate(
        "document.querySelectorAll('img, a, iframe, svg, object, embed, script:not([id])').length"
    )
    assert elements == 1  # only the page's own script: no element came from the data
    assert opened.page.evaluate("window.__pwned === undefined")
    assert "agent <b onmouseover=alert(1)>x</b>" in opened.text(".meta")
    opened.check_clean()  # no request (img src=x, iframe), no dialog, no console error


def test_embedded_json_cannot_close_its_script_block() -> None:
    value = {"text": "</script><!-- \u2028 \u2029 & <b>"}
    embedded = embed_json(value)
    assert "<" not in embedded and ">" not in embedded and "\u2028" not in embedded and "&" not in embedded
    assert json.loads(embedded) == value


def test_a_torn_corrupt_and_headerless_transcript_shows_what_it_can_and_says_what_it_skipped(
    open_page: Callable[[Path], Opened], tmp_path: Path
) -> None:
    records = tr.one_turn()
    lines = "".join(json.dumps(r) + "\n" for r in records[:3]) + "{not json\n"
    lines += "".join(json.dumps(r) + "\n" for r in records[3:5]) + '{"type": "message", "time": "2026-1'
    source = tmp_path / "broken.jsonl"
    source.write_text(lines, encoding="utf-8")  # no header, a bad line in the middle, a torn last line
    page = tmp_path / "broken.html"
    write_page(page, session_page(source))
    opened = open_page(page)
    opened.check_clean()
    skipped = opened.text("#skipped")
    assert "line 4: not JSON" in skipped
    assert "line 7: a torn last line (cut mid-write)" in skipped
    assert "no header line" in skipped
    kinds = opened.page.locator(".row").evaluate_all("rows => rows.map(r => r.dataset.kind)")
    assert kinds == ["turn", "model", "tool", "tool"]  # what was there, drawn
    assert_not_blank(opened)


def test_an_older_format_without_timings_still_draws(
    open_page: Callable[[Path], Opened], tmp_path: Path
) -> None:
    records = [tr.header(format=0), *tr.one_turn()]
    for record in records:
        record.pop("duration_s", None)
        record.pop("first_token_s", None)
    del records[1]  # no turn event either (files older than it)
    records.append({"type": "note", "what": "a record kind this runner does not know"})
    page = tmp_path / "old.html"
    write_page(page, session_page(tr.write(tmp_path / "old.jsonl", records)))
    opened = open_page(page)
    opened.check_clean()
    skipped = opened.text("#skipped")
    assert "format 0" in skipped and "line 8: not a transcript record" in skipped
    opened.page.locator(".row[data-kind=model]").first.click()
    assert "not recorded" in opened.text("#details")
    assert opened.text("[data-total='steps'] b") == "2"


def test_twenty_thousand_steps_open_and_scroll_with_few_rows_in_the_page(
    open_page: Callable[[Path], Opened], tmp_path: Path
) -> None:
    source = tr.write(tmp_path / "long.jsonl", [tr.header(), *tr.many_steps(20_000)])
    page = tmp_path / "long.html"
    write_page(page, session_page(source))
    opened = open_page(page)
    opened.check_clean()
    assert opened.text("[data-total='steps'] b") == "20,001"
    assert opened.text("#row-count") == "40,003 of 40,003 rows"
    assert opened.page.locator(".row").count() < 120  # only the rows in view exist
    viewport = opened.page.locator(".viewport")
    viewport.evaluate("v => { v.scrollTop = v.scrollHeight; }")
    opened.page.wait_for_selector(".row[data-kind=answer]", timeout=5_000)
    assert opened.page.locator(".row").count() < 120
    viewport.evaluate("v => { v.scrollTop = v.scrollHeight / 2; }")
    opened.page.wait_for_function(
        "() => document.querySelector('.row[data-kind=answer]') === null", timeout=5_000
    )
    opened.page.fill("#search", '"a": 19999,')
    opened.page.wait_for_function("() => document.getElementById('row-count').textContent.startsWith('1 of')")
    opened.check_clean()


@pytest.mark.parametrize("how", ["library", "cli"])
def test_secrets_in_tool_arguments_are_redacted_in_the_page(
    how: str, invoke: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret = "sk-live-4f9a8b7c6d5e4f3a"
    monkeypatch.setenv("SERVICE_API_KEY", secret)
    records = [tr.header(), *tr.one_turn(args=({"token": secret}, {"url": f"https://u:{secret}@h/x"}))]
    records[4]["content"] = f"echo {secret}"
    if how == "library":
        page = tmp_path / "p.html"
        write_page(page, session_page(tr.write(tmp_path / "s.jsonl", records)))
    else:
        home = tmp_path / "home"
        monkeypatch.setenv("RUNNER_HOME", str(home))
        tr.write(home / "sessions" / "20261201-120000-abcdefabcdef.jsonl", records)
        page = tmp_path / "cli.html"
        result = invoke("sessions", "show", "20261201", "--html", "-o", str(page))
        assert result.exit_code == 0, result.output
    text = page.read_text(encoding="utf-8")
    assert secret not in text
    tools = [r for r in page_data(page)["rows"] if r["k"] == "tool"]
    assert tools[0]["args"] == '{"token": "***"}' and "***@h/x" in tools[1]["args"]
    assert tools[0]["result"] == "echo ***"
