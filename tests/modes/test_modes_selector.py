"""The tool selector of ``function_calling: prompt`` (SPEC section 8; Open WebUI's non-native mode)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2
import pytest
from jinja2.exceptions import SecurityError

import runner
from runner.modes.prompt import (
    Selection,
    context_message,
    extract_selection,
    selection_context,
    selector_messages,
)
from runner.modes.templates import PROMPTS_DIR

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
NOW: dict[str, Any] = {
    "name": "now",
    "description": "The local time.",
    "parameters": {"type": "object", "properties": {}},
}
ANYTHING: dict[str, Any] = {"name": "log", "description": "Log anything.", "parameters": {"type": "object"}}
TOOLS = [WEATHER, NOW, ANYTHING]
BY_NAME = {"get_weather": WEATHER, "now": NOW, "log": ANYTHING}


def select(text: str) -> Selection:
    return extract_selection(text, BY_NAME)


# --- bad answers ----------------------------------------------------------------------------------


def test_prose_only_gives_no_calls_and_a_problem_saying_so() -> None:
    selection = select("I don't think any tool is needed; the user just says hello.")
    assert selection.calls == [] and selection.unknown == []
    assert len(selection.problems) == 1 and "prose" in selection.problems[0]


def test_empty_answer_gives_no_calls_and_a_problem() -> None:
    selection = select("<think>nothing to do</think>\n")
    assert selection.calls == [] and "empty" in selection.problems[0]


@pytest.mark.parametrize(
    "text",
    [
        '{"tool_calls": [{"name": "get_weather", "parameters": {"city": "Paris"',  # cut short
        '{"tool_calls": [{"name": "get_weather", "parameters": {"city": "Paris"}',  # one brace short
        "Result: {not json at all}",
        '{"tool_calls": [{"name": "get_weather", "parameters": {"city": "Par',  # inside a string
    ],
)
def test_invalid_json_gives_no_calls_and_a_problem_saying_so(text: str) -> None:
    selection = select(text)
    assert selection.calls == []
    assert len(selection.problems) == 1 and "not valid JSON" in selection.problems[0]


def test_tool_calls_that_is_not_a_list_is_a_problem() -> None:
    selection = select("{tool_calls: get_weather(city=Paris)}")
    assert selection.calls == [] and '"tool_calls" is not a list' in selection.problems[0]


def test_object_without_tool_calls_is_a_problem() -> None:
    selection = select('{"city": "Paris"}')
    assert selection.calls == [] and 'no "tool_calls"' in selection.problems[0]


def test_list_instead_of_an_object_is_accepted_as_the_calls() -> None:
    selection = select('[{"name": "get_weather", "parameters": {"city": "Paris"}}, {"name": "now"}]')
    assert selection.calls == [("get_weather", {"city": "Paris"}), ("now", {})] and selection.problems == []


def test_bare_call_object_is_accepted_as_one_call() -> None:
    assert select('{"name": "get_weather", "parameters": {"city": "Oslo"}}').calls == [
        ("get_weather", {"city": "Oslo"})
    ]


def test_arguments_openai_items_and_string_parameters_are_accepted() -> None:
    text = json.dumps(
        {
            "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "Lima"}},
                {"type": "function", "function": {"name": "now", "arguments": "{}"}},
                {"name": "get_weather", "parameters": '{"city": "Quito"}'},
            ]
        }
    )
    assert select(text).calls == [
        ("get_weather", {"city": "Lima"}),
        ("now", {}),
        ("get_weather", {"city": "Quito"}),
    ]


def test_empty_tool_calls_means_no_calls_and_no_problem() -> None:
    assert select('{"tool_calls": []}') == Selection()
    assert select('{"tool_calls": []}\nNo tool fits this question.') == Selection()


def test_unknown_tool_is_reported_and_not_called() -> None:
    selection = select('{"tool_calls": [{"name": "web_search", "parameters": {"q": "x"}}, {"name": "now"}]}')
    assert selection.calls == [("now", {})] and selection.unknown == ["web_search"]
    assert any("web_search" in note for note in selection.notes())


def test_extra_parameters_are_dropped_and_reported() -> None:
    selection = select(
        '{"tool_calls": [{"name": "get_weather", "parameters": '
        '{"city": "Rome", "units": "C", "lang": "it"}}]}'
    )
    assert selection.calls == [("get_weather", {"city": "Rome"})]
    assert selection.dropped == {"get_weather": ["units", "lang"]} and selection.problems == []
    assert any("units, lang" in note for note in selection.notes())


def test_schema_without_properties_keeps_every_parameter() -> None:
    assert select('{"name": "log", "parameters": {"level": "info", "text": "hi"}}').calls == [
        ("log", {"level": "info", "text": "hi"})
    ]


def test_missing_required_parameter_is_a_problem_but_the_call_is_kept() -> None:
    selection = select('{"tool_calls": [{"name": "get_weather", "parameters": {"days": 2}}]}')
    assert selection.calls == [("get_weather", {"days": 2})]
    assert selection.problems == ["get_weather is missing required parameters: city"]


def test_call_without_a_name_is_a_problem() -> None:
    selection = select('{"tool_calls": [{"parameters": {"city": "Rome"}}, {"name": "now"}]}')
    assert selection.calls == [("now", {})] and "no tool name" in selection.problems[0]


def test_fenced_json_with_prose_around_it_is_found() -> None:
    text = (
        'Sure! Here is my choice:\n```json\n{"tool_calls": [{"name": '
        '"now", "parameters": {}}]}\n```\nHope this helps {:'
    )
    assert select(text).calls == [("now", {})]


def test_json_inside_prose_with_other_braces_is_found() -> None:
    text = 'I will use {the clock}. {"tool_calls": [{"name": "now"}]} That is all {really}.'
    assert select(text).calls == [("now", {})]


def test_the_object_that_looks_like_an_answer_is_taken_over_other_json_in_the_prose() -> None:
    text = 'The schema is {"type": "object"}. My answer: {"name": "now", "parameters": {}} and no more.'
    assert select(text).calls == [("now", {})]


def test_first_to_last_brace_with_trailing_commas_and_single_quotes_is_repaired() -> None:
    text = "My answer: {'tool_calls': [{'name': 'get_weather', 'parameters': {'city': 'Nice',},},]} ok"
    assert select(text).calls == [("get_weather", {"city": "Nice"})]


def test_thinking_before_the_json_is_ignored() -> None:
    text = '<think>Maybe {"tool_calls": [{"name": "now"}]}? No.</think>\n{"tool_calls": []}'
    assert select(text) == Selection()


def test_selection_tool_calls_have_fresh_ids_and_json_arguments() -> None:
    calls = select(
        '[{"name": "get_weather", "parameters": {"city": "Zürich"}}, {"name": "now"}]'
    ).tool_calls()
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("get_weather", {"city": "Zürich"}),
        ("now", {}),
    ]
    assert calls[0].id != calls[1].id and "Zürich" in calls[0].arguments


# --- the request ----------------------------------------------------------------------------------


HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "<think>greet back</think>Hello! How can I help?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "1", "function": {"name": "now", "arguments": "{}"}}],
    },
    {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
]


def test_selector_messages_render_the_packaged_template_with_the_specs_as_json() -> None:
    messages = selector_messages(TOOLS, HISTORY, "Weather in Paris?")
    assert [m["role"] for m in messages] == ["system", "user"]
    system = messages[0]["content"]
    assert json.dumps([WEATHER["function"], NOW, ANYTHING], indent=2) in system
    assert '"tool_calls"' in system and '"parameters"' in system


def test_selector_user_message_carries_history_then_query() -> None:
    user = selector_messages(TOOLS, HISTORY, "Weather in Paris?")[1]["content"]
    assert user == (
        'History:\nUSER: """Hi"""\nASSISTANT: """Hello! How can I help?"""\nASSISTANT: """(called now)"""\n'
        'USER: """Thanks"""\nQuery: Weather in Paris?'
    )
    assert selector_messages(TOOLS, [], "Time?")[1]["content"] == "Query: Time?"


def test_selector_template_override_sees_tools_history_input_and_variables() -> None:
    template = (
        "{% for t in tools %}{{ t.name }};{% endfor %}|{{ history | length }}|{{ input }}|{{ agent }}|"
        "{{ (tools_json | length) > 0 }}"
    )
    messages = selector_messages(TOOLS, HISTORY, "q?", template_text=template, variables={"agent": "bot"})
    assert messages[0]["content"] == "get_weather;now;log;|4|q?|bot|True"


def test_selector_template_is_strict_and_sandboxed() -> None:
    with pytest.raises(jinja2.UndefinedError):
        selector_messages(TOOLS, [], "q", template_text="{{ nope }}")
    with pytest.raises(SecurityError):
        selector_messages(TOOLS, [], "q", template_text="{{ input.__class__.__mro__[1].__subclasses__() }}")


def test_selection_context_gives_the_template_variables() -> None:
    context = selection_context([WEATHER], HISTORY[:1], "q")
    assert context["tools"] == [WEATHER["function"]] and json.loads(context["tools_json"]) == [
        WEATHER["function"]
    ]
    assert context["history"] == [{"role": "user", "content": "Hi"}] and context["input"] == "q"


def test_prompt_templates_ship_inside_the_package() -> None:
    package = Path(runner.__file__).resolve().parent
    assert package / "modes" / "prompts" == PROMPTS_DIR
    for name in ("tool_selection.md.j2", "inline_xml.md.j2", "inline_markdown.md.j2"):
        assert (PROMPTS_DIR / name).is_file()


# --- the context ----------------------------------------------------------------------------------


def test_context_message_lists_each_tool_arguments_and_output_in_order() -> None:
    text = context_message(
        [("get_weather", {"city": "Paris"}, "Sunny, 21 °C\n", False), ("now", "{}", "clock broken", True)],
        notes=["The selector asked for an unknown tool 'fly'; it was not run."],
    )
    weather = (
        '<tool_result name="get_weather">\n<arguments>{"city": "Paris"}</arguments>'
        "\n<output>\nSunny, 21 °C\n</output>\n</tool_result>"
    )
    clock = (
        '<tool_result name="now" error="true">\n<arguments>{}</arguments>'
        "\n<output>\nclock broken\n</output>\n</tool_result>"
    )
    assert weather in text and clock in text and text.index(weather) < text.index(clock)
    assert text.endswith("Notes:\n- The selector asked for an unknown tool 'fly'; it was not run.")


def test_context_message_is_empty_when_nothing_ran() -> None:
    assert context_message([]) == ""
