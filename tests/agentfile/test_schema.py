"""The agent-file JSON Schema (schemas/agent.schema.json) and the reference generated from it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from runner.agentfile import config as model
from runner.agentfile.schema_doc import render_markdown
from runner.resources import data_dir, load_schema, schema_text

Doc = dict[str, Any]
Path = tuple[str | int, ...]

MINIMAL: Doc = {"version": 1, "name": "weather"}

FULL: Doc = {
    "version": 1,
    "name": "weather",
    "description": "Answers weather questions.",
    "extends": "./base.yaml",
    "model": {
        "id": "openai/gpt-4o-mini",
        "api_base": "http://127.0.0.1:8000/v1",
        "api_key": "sk-from-env",
        "temperature": 0.2,
        "max_tokens": 1024,
        "stream": True,
        "timeout_s": 120,
        "retries": 2,
        "params": {"top_p": 0.9, "seed": 7},
        "fallbacks": ["anthropic/claude-3-5-haiku-latest"],
        "x-note": "ignored",
    },
    "function_calling": "inline",
    "tool_format": "markdown",
    "selector": {"model": "openai/gpt-4o-mini", "rounds": 2, "history": 0},
    "prompts": {
        "system": "You are a weather assistant. Today is {{ now('%Y-%m-%d') }}.",
        "user": {"file": "prompts/user.md.j2"},
        "status": None,
        "tool_selection": "Pick tools from {{ tools }}.",
    },
    "vars": {"units": "metric", "_count": 3, "nested": {"a": [1, None]}},
    "tools": [
        {"python": "toolsets_local.weather:get_weather", "confirm": False},
        {"python": "toolsets_local.geo", "include": ["geo_*"], "exclude": ["geo_debug"]},
        {
            "openapi": "http://127.0.0.1:8080/openapi.json",
            "id": "petstore",
            "headers": {"Authorization": "Bearer token"},
            "base_url": "http://127.0.0.1:8080/v2",
            "include": ["getPetById", "addPet"],
            "prefix": True,
        },
        {"mcp": "http://127.0.0.1:3001/mcp", "id": "everything", "headers": {"X-Key": "k"}},
        {
            "mcp": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}, "cwd": "."},
            "id": "time",
            "timeout_s": 5.5,
        },
        {"builtin": "files", "with": {"root": "./workspace"}},
        {"builtin": "shell", "confirm": True},
        {"agent": "./researcher.yaml", "description": "Researches a topic.", "x-owner": "me"},
        {
            "a2a": "https://agents.example.com/a2a/travel",
            "headers": {"Authorization": "Bearer ${KEY}"},
            "timeout_s": 30,
        },
    ],
    "skills": ["skills", ".agents/skills"],
    "permissions": {"allow": ["time_*"], "ask": ["shell"], "deny": ["shell(command=rm *)"]},
    "hooks": {
        "session_start": [{"message": "Session for {{ agent }}.", "role": "system"}],
        "turn_pre": [{"python": "hooks_local.audit:on_turn", "required": True}],
        "step_pre": [],
        "generation_post": [{"command": "./check.sh", "timeout_s": 5}],
        "tool_pre": [{"python": "hooks_local.guard:check"}],
        "tool_post": [{"command": "cat > /dev/null"}],
        "turn_post": [{"command": "pytest -q"}],
        "loop_continue": [{"python": "hooks_local.review:ask_for_review"}],
        "session_end": [{"message": "bye"}],
    },
    "serve": {"tool_details": False},
    "output": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "limits": {
        "max_steps": 25,
        "max_turns": 50,
        "max_tool_calls": 200,
        "max_repeat": 3,
        "max_parallel": 8,
        "max_tokens": None,
        "max_cost_usd": 0.5,
        "timeout_s": 600,
        "tool_timeout_s": 60,
        "tool_output_chars": 20000,
        "context_tokens": 100000,
        "max_queue": 100,
        "output_retries": 2,
    },
    "tests": [
        {
            "name": "vancouver",
            "input": "What's the weather in Vancouver?",
            "cassette": "tests/cassettes/vancouver.jsonl",
            "vars": {"units": "imperial"},
            "expect": {
                "output_contains": "°C",
                "output_matches": r"\d+",
                "tools_called": ["get_weather"],
                "ordered": True,
                "max_steps": 3,
            },
        },
        {"name": "list", "input": "hi", "expect": {"output_contains": ["a", "b"]}},
    ],
    "evals": [{"name": "polite", "input": "hi", "repeat": 5, "expect": {"judge": "The answer is polite."}}],
    "judge": {"id": "openai/gpt-4o", "temperature": 0},
    "x-defaults": {"anything": True},
}

TEAM: Doc = {
    "version": 1,
    "description": "A small team.",
    "agents": {
        "lead": {
            "model": "openai/gpt-4o-mini",
            "tools": [{"agent": "#researcher"}],
        },
        "researcher": {"name": "researcher-2", "description": "Finds things.", "model": "openai/gpt-4o"},
    },
    "x-shared": [1, 2],
}


def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_schema())


def _with(base: Doc, **changes: Any) -> Doc:
    return {**base, **changes}


def _walk(node: Any, path: Path = ()) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every schema object in ``node``, with where it is."""
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _walk(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, (*path, index))


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    defs = load_schema()["$defs"]
    while "$ref" in node and "description" not in node:
        node = defs[node["$ref"].removeprefix("#/$defs/")]
    return node


def _flatten(errors: Any) -> Iterator[jsonschema.ValidationError]:
    for error in errors:
        yield error
        yield from _flatten(error.context or ())


# --- the schema itself ------------------------------------------------------------------------------


def test_schema_is_valid_draft_2020_12() -> None:
    schema = load_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "https://runner.dev/schemas/agent.schema.json"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_schema_file_is_two_space_json_with_trailing_newline() -> None:
    text = schema_text()
    assert text == json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n"


def test_every_property_has_a_description() -> None:
    missing = [
        (*path, key)
        for path, node in _walk(load_schema())
        if isinstance(node.get("properties"), dict)
        for key, prop in node["properties"].items()
        if not _resolve(prop).get("description")
    ]
    assert missing == []


def test_every_def_has_a_description() -> None:
    defs = load_schema()["$defs"]
    assert [name for name, node in defs.items() if not node.get("description")] == []


def test_every_object_with_fixed_keys_is_closed_but_accepts_x_keys() -> None:
    open_objects = [
        path
        for path, node in _walk(load_schema())
        if "properties" in node
        and (node.get("additionalProperties") is not False or node.get("patternProperties") != {"^x-": {}})
    ]
    assert open_objects == []


def test_team_agent_has_the_agent_keys_but_version() -> None:
    defs = load_schema()["$defs"]
    assert list(defs["team_agent"]["properties"]) == [
        key for key in defs["agent_file"]["properties"] if key != "version"
    ]
    assert "required" not in defs["team_agent"]


def test_kinds_events_and_toolsets_match_the_typed_model() -> None:
    defs = load_schema()["$defs"]
    source_branches = [_resolve(ref)["required"] for ref in defs["tool_source"]["oneOf"]]
    assert source_branches == [[kind] for kind in model.SOURCE_KINDS]
    hook_branches = [_resolve(ref)["required"] for ref in defs["hook"]["oneOf"]]
    assert hook_branches == [[kind] for kind in model.HOOK_KINDS]
    assert tuple(defs["hooks"]["properties"]) == model.HOOK_EVENTS
    assert tuple(defs["builtin_source"]["properties"]["builtin"]["enum"]) == model.BUILTIN_TOOLSETS
    assert defs["function_calling"]["enum"] == ["auto", "native", "prompt", "inline"]


@pytest.mark.parametrize(
    ("def_name", "spec_class"),
    [
        ("model_options", model.ModelConfig),
        ("selector", model.SelectorConfig),
        ("limits", model.LimitsConfig),
        ("expect", model.ExpectConfig),
    ],
)
def test_defaults_match_the_typed_model(def_name: str, spec_class: type) -> None:
    properties = load_schema()["$defs"][def_name]["properties"]
    for spec_field in dataclasses.fields(spec_class):
        assert spec_field.name in properties, spec_field.name
        if "default" in properties[spec_field.name]:
            assert properties[spec_field.name]["default"] == spec_field.default, spec_field.name


def test_limits_are_all_in_the_typed_model() -> None:
    properties = load_schema()["$defs"]["limits"]["properties"]
    assert list(properties) == [f.name for f in dataclasses.fields(model.LimitsConfig)]


# --- valid documents --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        MINIMAL,
        FULL,
        TEAM,
        _with(MINIMAL, model="ollama/llama3.1"),
        _with(MINIMAL, prompts={"status": "Step {{ step }}", "system": {"file": "s.md"}}),
        _with(MINIMAL, tools=[], hooks={}, limits={}, tests=[], vars={}),
        _with(MINIMAL, limits={"max_tokens": 1000, "max_cost_usd": None, "timeout_s": None}),
        _with(TEAM, name="crew"),
    ],
    ids=["minimal", "full", "team", "model-string", "templates", "empty", "limits", "team-named"],
)
def test_valid_documents(doc: Doc) -> None:
    assert list(_validator().iter_errors(doc)) == []


def test_full_document_uses_every_top_level_key() -> None:
    keys = set(load_schema()["$defs"]["agent_file"]["properties"])
    assert keys - set(FULL) == set()


def test_full_document_uses_every_source_and_hook_kind() -> None:
    assert {kind for source in FULL["tools"] for kind in model.SOURCE_KINDS if kind in source} == set(
        model.SOURCE_KINDS
    )
    hooks = [hook for chain in FULL["hooks"].values() for hook in chain]
    assert {kind for hook in hooks for kind in model.HOOK_KINDS if kind in hook} == set(model.HOOK_KINDS)


# --- invalid documents ------------------------------------------------------------------------------

TOOL = ("tools", 0)
HOOK = ("hooks", "turn_post", 0)

INVALID: list[tuple[str, Doc, Path, str, Path]] = [
    # id, document, path of the top-level errors, validator of the reason, its path (() = the same)
    ("no-version", {"name": "a"}, (), "required", ()),
    ("version-2", _with(MINIMAL, version=2), ("version",), "const", ("version",)),
    ("no-name", {"version": 1}, (), "required", ()),
    ("bad-name", _with(MINIMAL, name="Weather"), ("name",), "pattern", ("name",)),
    ("long-name", _with(MINIMAL, name="a" * 65), ("name",), "pattern", ("name",)),
    ("unknown-key", _with(MINIMAL, modle="x"), (), "additionalProperties", ()),
    ("upper-x-key", _with(MINIMAL, **{"X-note": 1}), (), "additionalProperties", ()),
    ("model-empty", _with(MINIMAL, model=""), ("model",), "minLength", ("model",)),
    ("model-number", _with(MINIMAL, model=5), ("model",), "type", ("model",)),
    ("model-no-id", _with(MINIMAL, model={"stream": True}), ("model",), "required", ("model",)),
    (
        "model-temperature",
        _with(MINIMAL, model={"id": "m", "temperature": 2.5}),
        ("model", "temperature"),
        "maximum",
        ("model", "temperature"),
    ),
    (
        "model-timeout",
        _with(MINIMAL, model={"id": "m", "timeout_s": 0}),
        ("model", "timeout_s"),
        "exclusiveMinimum",
        ("model", "timeout_s"),
    ),
    (
        "model-retries",
        _with(MINIMAL, model={"id": "m", "retries": 11}),
        ("model", "retries"),
        "maximum",
        ("model", "retries"),
    ),
    (
        "model-unknown",
        _with(MINIMAL, model={"id": "m", "temprature": 1}),
        ("model",),
        "additionalProperties",
        ("model",),
    ),
    (
        "function-calling",
        _with(MINIMAL, function_calling="tools"),
        ("function_calling",),
        "enum",
        ("function_calling",),
    ),
    ("tool-format", _with(MINIMAL, tool_format="json"), ("tool_format",), "enum", ("tool_format",)),
    (
        "selector-rounds",
        _with(MINIMAL, selector={"rounds": 0}),
        ("selector", "rounds"),
        "minimum",
        ("selector", "rounds"),
    ),
    (
        "template-no-file",
        _with(MINIMAL, prompts={"system": {"path": "s.md"}}),
        ("prompts", "system"),
        "required",
        ("prompts", "system"),
    ),
    (
        "user-null",
        _with(MINIMAL, prompts={"user": None}),
        ("prompts", "user"),
        "type",
        ("prompts", "user"),
    ),
    ("vars-bad-name", _with(MINIMAL, vars={"bad-name": 1}), ("vars",), "pattern", ("vars",)),
    ("tools-not-list", _with(MINIMAL, tools={"python": "m"}), ("tools",), "type", ("tools",)),
    ("source-no-kind", _with(MINIMAL, tools=[{"id": "x"}]), TOOL, "required", TOOL),
    (
        "source-two-kinds",
        _with(MINIMAL, tools=[{"python": "m", "mcp": "http://h/mcp"}]),
        TOOL,
        "additionalProperties",
        TOOL,
    ),
    (
        "python-bad-path",
        _with(MINIMAL, tools=[{"python": "my module:f"}]),
        TOOL,
        "pattern",
        (*TOOL, "python"),
    ),
    (
        "source-bad-id",
        _with(MINIMAL, tools=[{"python": "m", "id": "has space"}]),
        TOOL,
        "pattern",
        (*TOOL, "id"),
    ),
    (
        "source-timeout",
        _with(MINIMAL, tools=[{"python": "m", "timeout_s": 0}]),
        TOOL,
        "exclusiveMinimum",
        (*TOOL, "timeout_s"),
    ),
    (
        "python-with-option",
        _with(MINIMAL, tools=[{"python": "m", "with": {}}]),
        TOOL,
        "additionalProperties",
        TOOL,
    ),
    ("builtin-unknown", _with(MINIMAL, tools=[{"builtin": "web"}]), TOOL, "enum", (*TOOL, "builtin")),
    ("mcp-no-command", _with(MINIMAL, tools=[{"mcp": {"args": []}}]), TOOL, "required", (*TOOL, "mcp")),
    ("openapi-empty", _with(MINIMAL, tools=[{"openapi": ""}]), TOOL, "minLength", (*TOOL, "openapi")),
    (
        "headers-not-strings",
        _with(MINIMAL, tools=[{"openapi": "o.json", "headers": {"X": 1}}]),
        TOOL,
        "type",
        (*TOOL, "headers", "X"),
    ),
    ("permissions-string", _with(MINIMAL, permissions={"ask": "shell"}), ("permissions", "ask"), "type", ()),
    ("hook-unknown-event", _with(MINIMAL, hooks={"turn_end": []}), ("hooks",), "additionalProperties", ()),
    (
        "python-hook-no-function",
        _with(MINIMAL, hooks={"turn_post": [{"python": "hooks_local.review"}]}),
        HOOK,
        "pattern",
        (*HOOK, "python"),
    ),
    (
        "message-hook-role",
        _with(MINIMAL, hooks={"turn_post": [{"message": "m", "role": "assistant"}]}),
        HOOK,
        "enum",
        (*HOOK, "role"),
    ),
    (
        "role-on-command-hook",
        _with(MINIMAL, hooks={"turn_post": [{"command": "true", "role": "user"}]}),
        HOOK,
        "additionalProperties",
        HOOK,
    ),
    (
        "hook-timeout",
        _with(MINIMAL, hooks={"turn_post": [{"command": "true", "timeout_s": -1}]}),
        HOOK,
        "exclusiveMinimum",
        (*HOOK, "timeout_s"),
    ),
    ("max-steps-zero", _with(MINIMAL, limits={"max_steps": 0}), ("limits", "max_steps"), "minimum", ()),
    (
        "max-steps-float",
        _with(MINIMAL, limits={"max_steps": 2.5}),
        ("limits", "max_steps"),
        "type",
        ("limits", "max_steps"),
    ),
    (
        "output-chars",
        _with(MINIMAL, limits={"tool_output_chars": 50}),
        ("limits", "tool_output_chars"),
        "minimum",
        (),
    ),
    (
        "cost-zero",
        _with(MINIMAL, limits={"max_cost_usd": 0}),
        ("limits", "max_cost_usd"),
        "exclusiveMinimum",
        (),
    ),
    ("limits-unknown", _with(MINIMAL, limits={"max_step": 3}), ("limits",), "additionalProperties", ()),
    ("test-no-input", _with(MINIMAL, tests=[{"name": "t"}]), ("tests", 0), "required", ()),
    (
        "test-contains-number",
        _with(MINIMAL, tests=[{"name": "t", "input": "i", "expect": {"output_contains": 5}}]),
        ("tests", 0, "expect", "output_contains"),
        "type",
        (),
    ),
    ("team-no-agents", {"version": 1, "agents": {}}, ("agents",), "minProperties", ()),
    ("team-bad-name", {"version": 1, "agents": {"Lead": {}}}, ("agents",), "pattern", ()),
    (
        "team-agent-version",
        {"version": 1, "agents": {"lead": {"version": 1}}},
        ("agents", "lead"),
        "additionalProperties",
        (),
    ),
    ("team-no-version", {"agents": {"lead": {}}}, (), "required", ()),
    ("team-with-bad-name", {"version": 1, "name": "T T", "agents": {"lead": {}}}, ("name",), "pattern", ()),
]


@pytest.mark.parametrize(
    ("doc", "path", "reason", "reason_path"),
    [case[1:] for case in INVALID],
    ids=[case[0] for case in INVALID],
)
def test_invalid_documents(doc: Doc, path: Path, reason: str, reason_path: Path) -> None:
    errors = list(_validator().iter_errors(doc))
    assert errors
    assert {tuple(error.absolute_path) for error in errors} == {path}
    # the reason is the error itself or, under a oneOf, the error of the branch that was meant
    expected_path = reason_path or path
    found = {(error.validator, tuple(error.absolute_path)) for error in _flatten(errors)}
    assert (reason, expected_path) in found, found


def test_one_of_reports_the_branch_of_the_given_kind() -> None:
    doc = _with(MINIMAL, tools=[{"python": "m", "headers": {}}])
    (error,) = _validator().iter_errors(doc)
    assert error.validator == "oneOf"
    by_branch: dict[int, set[str]] = {}
    for branch_error in error.context:
        by_branch.setdefault(branch_error.schema_path[0], set()).add(branch_error.validator)
    assert by_branch[0] == {"additionalProperties"}  # python, the kind the entry names
    assert all("required" in by_branch[index] for index in range(1, 5))


# --- the generated reference ------------------------------------------------------------------------


def test_docs_format_md_is_generated_from_the_schema() -> None:
    generated = render_markdown(load_schema())
    committed = (data_dir("schemas").parent / "docs" / "format.md").read_text(encoding="utf-8")
    assert committed == generated, "run: python -m runner.agentfile.schema_doc > docs/format.md"


def test_reference_has_a_section_and_row_per_object_and_key() -> None:
    schema = load_schema()
    text = render_markdown(schema)
    for name, node in schema["$defs"].items():
        if "properties" in node:
            assert f'<a id="{name}"></a>' in text
            assert f"## {node['title']}" in text
            for key in node["properties"]:
                assert f"| `{key}` |" in text, (name, key)
    assert "| `max_steps` | integer (≥ 1) | `25` |" in text
    assert "| `name` | string (matching `^[a-z0-9][a-z0-9_-]{0,63}$`) | required |" in text
    assert "[Python source](#python_source)" in text


def test_reference_follows_refs_and_escapes_pipes() -> None:
    schema: Doc = {
        "title": "T",
        "$defs": {
            "thing": {
                "title": "Thing",
                "description": "A thing.",
                "type": "object",
                "required": ["kind"],
                "properties": {
                    "kind": {"$ref": "#/$defs/kind"},
                    "size": {"description": "Size.", "type": ["integer", "null"], "default": None},
                    "items": {"description": "Items.", "type": "array", "items": {"$ref": "#/$defs/thing"}},
                },
            },
            "kind": {"description": "a | b", "enum": ["a", "b"]},
        },
    }
    text = render_markdown(schema)
    assert '| `kind` | `"a"` or `"b"` | required | a \\| b |' in text
    assert "| `size` | integer or null | `null` | Size. |" in text
    assert "| `items` | list of [Thing](#thing) |  | Items. |" in text
    assert "## Kind" not in text and "## kind" not in text
