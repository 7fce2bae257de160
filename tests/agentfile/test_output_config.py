"""``output:`` as ``runner validate`` and ``runner render`` see it: every bad schema is a located error
(FILE:LINE:COL: PATH: message, exit code 2, no traceback); ``render`` shows how the answer is asked for.

The commands run in-process (typer's CliRunner); the import checks run the real command in a
subprocess (``-X importtime``), as tests/test_startup_imports.py does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from runner.cli import main

ROOT = Path(__file__).resolve().parent.parent.parent

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp": {"type": "number"}},
    "required": ["city", "temp"],
    "additionalProperties": False,
}

MODELS = '''
from typing import Callable

import pydantic


class Forecast(pydantic.BaseModel):
    city: str
    temp: float


def forecast() -> None:
    """A function, not a model."""


class Plain:
    """A class, not a model."""


class Opaque(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    convert: Callable[[int], int]


class Warped(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(json_schema_extra={"properties": {"city": {"type": "strin"}}})
    city: str
'''


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(main._state, "debug", False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("RUNNER_MODEL", raising=False)


def invoke(*args: str) -> Result:
    """Run the app; it never shows a traceback, whatever the input."""
    result = CliRunner().invoke(main.app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result


def agent(name: str, output: str, *, model: str = "openai/gpt-4o-mini", extra: str = "") -> str:
    """An agent file ``name.yaml`` whose line 4 is ``output: <output>`` (a flow value or a block)."""
    Path(f"{name}.yaml").write_text(
        f"version: 1\nname: {name}\nmodel: {model}\noutput: {output}\n{extra}", encoding="utf-8"
    )
    return f"{name}.yaml"


def errors_of(*files: str) -> list[str]:
    result = invoke("validate", *files)
    assert result.exit_code == 2, result.output
    return result.output.splitlines()


# ----------------------------------------------------------------- an inline schema


def test_an_unknown_type_in_an_inline_schema_is_located_with_a_suggestion() -> None:
    file = agent("a", "\n  type: object\n  properties:\n    city: {type: strin}\n")
    assert errors_of(file) == [
        "a.yaml:7:18: output.properties.city.type: not a valid JSON Schema: unknown type 'strin' "
        "(did you mean 'string'?)"
    ]


def test_a_keyword_with_a_wrong_value_is_located_and_shown_as_json() -> None:
    # `required: yes` is YAML's true: the message says so in JSON's words, not Python's (True)
    file = agent("a", "\n  type: object\n  properties:\n    city: {type: string}\n  required: yes\n")
    assert errors_of(file) == [
        "a.yaml:8:13: output.required: not a valid JSON Schema: expected array, got true"
    ]


def test_a_ref_that_does_not_resolve_suggests_the_def_it_meant() -> None:
    file = agent(
        "a",
        '\n  type: object\n  properties:\n    city: {$ref: "#/$defs/Cty"}\n'
        "  $defs:\n    City: {type: string}\n",
    )
    assert errors_of(file) == [
        "a.yaml:7:18: output.properties.city.$ref: $ref '#/$defs/Cty' does not resolve: the schema has "
        "nothing at /$defs/Cty (did you mean '#/$defs/City'?)"
    ]


def test_a_pattern_that_is_no_regular_expression_is_located() -> None:
    # unchecked, it would pass validate and make every answer's check raise re.error
    file = agent("a", '\n  type: object\n  properties:\n    city: {type: string, pattern: "[A-Z"}\n')
    assert errors_of(file) == [
        'a.yaml:7:35: output.properties.city.pattern: not a valid JSON Schema: "[A-Z" is not a valid '
        "regular expression (unterminated character set at position 0)"
    ]


def test_an_unknown_schema_dialect_is_named_with_a_suggestion() -> None:
    file = agent("a", '{$schema: "https://json-schema.org/draft/2020-12/schem", type: object}')
    assert errors_of(file) == [
        "a.yaml:4:19: output.$schema: unknown $schema 'https://json-schema.org/draft/2020-12/schem' "
        "(did you mean 'https://json-schema.org/draft/2020-12/schema'?)"
    ]


@pytest.mark.parametrize(("value", "shown"), [("5", "5"), ("[a]", '["a"]')])
def test_a_schema_dialect_that_is_not_a_string_is_an_error_not_a_crash(value: str, shown: str) -> None:
    # jsonschema itself raises on it (AttributeError, TypeError): validate said "internal error"
    file = agent("a", f"{{$schema: {value}, type: object}}")
    assert errors_of(file) == [
        f"a.yaml:4:19: output.$schema: $schema must be the URI of a JSON Schema draft, not {shown}"
    ]


def test_a_broken_schema_that_skipped_validate_fails_answers_with_a_message() -> None:
    from runner.agentfile.output_schema import OutputSchema

    schema = OutputSchema({"type": "object", "properties": {"a": {"type": "string", "pattern": "(x"}}})
    (problem,) = schema.problems({"a": "x"})
    assert problem.startswith("the schema cannot be used: a pattern is not a regular expression")
    unknown_type = OutputSchema({"type": "object", "properties": {"a": {"type": "strin"}}})
    assert unknown_type.problems({"a": "x"})[0].startswith("the schema cannot be used: UnknownType")
    dangling = OutputSchema({"properties": {"a": {"$ref": "#/$defs/Nope"}}})
    assert dangling.problems({"a": "x"})[0].startswith("the schema cannot be used: ")


def test_refs_are_looked_for_in_schemas_not_in_data_but_in_properties_of_any_name() -> None:
    file = agent(
        "a",
        "\n  type: object\n  default: {$ref: not-a-reference}\n  examples: [{$ref: nor-this}]\n"
        "  properties:\n    default: {$ref: '#/$defs/Nope'}\n    enum: {$ref: '#/$defs/A'}\n"
        "  $defs:\n    A: {type: string}\n",
    )
    assert errors_of(file) == [
        "a.yaml:9:21: output.properties.default.$ref: $ref '#/$defs/Nope' does not resolve: the schema "
        "has nothing at /$defs/Nope (did you mean '#/$defs/A'?)"
    ]


@pytest.mark.parametrize("ref", ["other.json#/City", "https://example.com/city.json"])
def test_a_ref_to_another_file_or_a_url_is_refused(ref: str) -> None:
    file = agent("a", f'\n  type: object\n  properties:\n    city: {{$ref: "{ref}"}}\n')
    assert errors_of(file) == [
        f"a.yaml:7:18: output.properties.city.$ref: $ref '{ref}' points outside the schema; only "
        "references inside it (#/$defs/...) are followed"
    ]


@pytest.mark.parametrize(
    ("output", "got"), [("[city, temp]", "a list"), ("an object with a city", '"an object with a city"')]
)
def test_output_that_is_a_list_or_a_string_is_refused_by_the_agent_schema(output: str, got: str) -> None:
    assert errors_of(agent("a", output)) == [f"a.yaml:4:9: output: expected a mapping, got {got}"]


# ----------------------------------------------------------------- a schema file


@pytest.mark.parametrize(
    ("name", "text", "type_at", "required_at"),
    [
        (
            "schema.json",
            '{\n  "type": "object",\n  "properties": {\n    "a": {"type": "strng"}\n  },\n'
            '  "required": true\n}\n',
            "4:19",
            "6:15",
        ),
        ("schema.yaml", "type: object\nproperties:\n  a:\n    type: strng\nrequired: yes\n", "4:11", "5:11"),
    ],
)
def test_an_invalid_schema_file_is_located_in_that_file(
    name: str, text: str, type_at: str, required_at: str
) -> None:
    Path(name).write_text(text, encoding="utf-8")
    assert errors_of(agent("a", f"{{file: {name}}}")) == [
        f"{name}:{type_at}: properties.a.type: not a valid JSON Schema: unknown type 'strng' "
        "(did you mean 'string'?)",
        f"{name}:{required_at}: required: not a valid JSON Schema: expected array, got true",
    ]


def test_a_ref_in_a_schema_file_that_does_not_resolve_is_located_there() -> None:
    Path("s.yaml").write_text(
        "type: object\nproperties:\n  a: {$ref: '#/$defs/Aa'}\n$defs:\n  A: {type: string}\n",
        encoding="utf-8",
    )
    assert errors_of(agent("a", "{file: s.yaml}")) == [
        "s.yaml:3:13: properties.a.$ref: $ref '#/$defs/Aa' does not resolve: the schema has nothing at "
        "/$defs/Aa (did you mean '#/$defs/A'?)"
    ]


def _write(name: str, content: bytes | None) -> None:
    if content is None:
        Path(name).mkdir()
    else:
        Path(name).write_bytes(content)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "gone.json",
            "missing",
            "output schema file not found: gone.json (hint: looked for {tmp}/gone.json)",
        ),
        ("folder", None, "output schema file folder is a directory"),
        (
            "s.json",
            b'{"type": "object"\x00\x01\x02}',
            "output schema file s.json is a binary file, not JSON or YAML",
        ),
        (
            "s.json",
            b'{"description": "' + b"x" * 1_000_001 + b'"}',
            "output schema file s.json is too large (the limit is 1,000,000 bytes)",
        ),
        ("s.json", b"", "output schema file s.json: the file is empty"),
    ],
    ids=["missing", "directory", "binary", "too-large", "empty"],
)
def test_a_schema_file_that_cannot_be_read_is_located_at_output_file(
    tmp_path: Path, name: str, content: bytes | str | None, message: str
) -> None:
    if not isinstance(content, str):  # "missing": nothing is written
        _write(name, content)
    expected = message.format(tmp=tmp_path.resolve())
    assert errors_of(agent("a", f"{{file: {name}}}")) == [f"a.yaml:4:16: output.file: {expected}"]


def test_a_schema_file_that_is_not_utf8_is_located_at_the_bad_byte() -> None:
    Path("s.json").write_bytes(b'{"type": "object",\n "description": "caf\xe9"}')
    assert errors_of(agent("a", "{file: s.json}")) == [
        "s.json:2:21: output schema file s.json is not UTF-8 text (byte 0xe9)"
    ]


def test_a_yaml_syntax_error_in_a_schema_file_is_located_in_it() -> None:
    Path("s.yaml").write_text("type: object\nproperties:\n  a: {type: string\n", encoding="utf-8")
    (line,) = errors_of(agent("a", "{file: s.yaml}"))
    assert line.startswith("s.yaml:4:1: YAML syntax error: did not find expected ',' or '}'")


def test_a_schema_file_that_is_not_a_mapping_is_refused() -> None:
    Path("s.json").write_text("[1, 2]", encoding="utf-8")
    assert errors_of(agent("a", "{file: s.json}")) == [
        "s.json:1:1: an output schema must be a mapping (a JSON Schema object), not list"
    ]


# ----------------------------------------------------------------- a pydantic model


@pytest.fixture
def models(tmp_path: Path) -> str:
    """A module of models beside the agent files; its name is unique to the test (no stale import)."""
    name = f"models_{abs(hash(str(tmp_path))) % 10**9}"
    (tmp_path / f"{name}.py").write_text(MODELS, encoding="utf-8")
    (tmp_path / f"{name}_raises.py").write_text('raise RuntimeError("no weather today")\n', encoding="utf-8")
    return name


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("nomodule_here:Forecast", "cannot import module 'nomodule_here': no such module (hint: looked in"),
        ("{m}_raises:Forecast", "importing '{m}_raises' failed: RuntimeError: no weather today"),
        ("{m}:Forecst", "module '{m}' has no class 'Forecst' (did you mean 'Forecast'?)"),
        ("{m}:forecast", "'{m}:forecast' is not a pydantic model (it is a function) (hint: name a class"),
        ("{m}:Plain", "'{m}:Plain' is not a pydantic model (it is a class) (hint: name a class"),
        ("{m}:Opaque", "the JSON Schema of {m}:Opaque cannot be made: PydanticInvalidForJsonSchema: "),
        # unchecked, every answer's check raised jsonschema's UnknownType
        (
            "{m}:Warped",
            "the JSON Schema of {m}:Warped is not usable at properties.city.type: not a valid JSON "
            "Schema: unknown type 'strin' (did you mean 'string'?)",
        ),
    ],
    ids=[
        "no-module",
        "raises-on-import",
        "missing-name",
        "function",
        "plain-class",
        "no-json-schema",
        "invalid-json-schema",
    ],
)
def test_a_python_model_that_cannot_be_used_is_located_at_output_python(
    models: str, target: str, message: str
) -> None:
    (line,) = errors_of(agent("a", f"{{python: {target.format(m=models)}}}"))
    assert line.startswith(f"a.yaml:4:18: output.python: {message.format(m=models)}"), line


def test_a_valid_model_a_valid_file_and_a_valid_inline_schema_pass(models: str) -> None:
    Path("s.yaml").write_text("type: object\nproperties:\n  a: {type: string}\n", encoding="utf-8")
    files = [
        agent("m", f"{{python: {models}:Forecast}}"),
        agent("f", "{file: s.yaml}"),
        agent("i", json.dumps(SCHEMA)),
    ]
    result = invoke("validate", *files)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["m.yaml: ok (m)", "f.yaml: ok (f)", "i.yaml: ok (i)"]


# ----------------------------------------------------------------- extends and team files


def render_json(*args: str) -> dict[str, Any]:
    result = invoke("render", *args, "--json")
    assert result.exit_code == 0, result.output
    rendered: dict[str, Any] = json.loads(result.stdout)
    return rendered


def test_a_childs_output_replaces_the_bases_whole_not_key_by_key() -> None:
    Path("base.yaml").write_text(
        "version: 1\nname: base\nmodel: {id: openai/scripted, api_base: 'http://127.0.0.1:9/v1'}\n"
        f"output: {json.dumps(SCHEMA)}\n",
        encoding="utf-8",
    )
    Path("child.yaml").write_text(
        "version: 1\nname: child\nextends: base.yaml\noutput:\n  type: object\n  properties:\n"
        "    ok: {type: boolean}\n",
        encoding="utf-8",
    )
    # merged key by key, `required: [city, temp]` and `additionalProperties: false` would survive
    assert render_json("child.yaml")["output"]["schema"] == {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
    }
    assert render_json("base.yaml")["output"]["schema"] == SCHEMA


def test_a_schema_file_named_in_a_base_resolves_relative_to_the_base(tmp_path: Path) -> None:
    (tmp_path / "base" / "schemas").mkdir(parents=True)
    (tmp_path / "base" / "schemas" / "forecast.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    (tmp_path / "base" / "base.yaml").write_text(
        "version: 1\nname: base\nmodel: {id: openai/scripted, api_base: 'http://127.0.0.1:9/v1'}\n"
        "output: {file: schemas/forecast.json}\n",
        encoding="utf-8",
    )
    Path("child.yaml").write_text("version: 1\nname: child\nextends: base/base.yaml\n", encoding="utf-8")
    assert invoke("validate", "child.yaml").exit_code == 0
    assert render_json("child.yaml")["output"]["schema"] == SCHEMA
    # a broken schema in the base is reported in the base's schema file, also through the child
    (tmp_path / "base" / "schemas" / "forecast.json").write_text('{"type": "objct"}', encoding="utf-8")
    (line,) = errors_of("child.yaml")
    assert line.startswith(
        "base/schemas/forecast.json:1:10: type: not a valid JSON Schema: unknown type 'objct'"
    )


def test_team_members_output_is_checked_and_rendered() -> None:
    Path("team.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    Path("team.yaml").write_text(
        "version: 1\nagents:\n  lead:\n    model: {id: openai/scripted, api_base: 'http://127.0.0.1:9/v1'}\n"
        "    output: {file: team.json}\n  helper:\n    model: openai/gpt-4o-mini\n"
        "    output: {type: object, properties: {x: {type: strin}}}\n",
        encoding="utf-8",
    )
    assert errors_of("team.yaml") == [
        "team.yaml:8:51: agents.helper.output.properties.x.type: not a valid JSON Schema: unknown type "
        "'strin' (did you mean 'string'?)"
    ]
    Path("team.yaml").write_text(
        Path("team.yaml").read_text(encoding="utf-8").replace("strin}", "string}"), encoding="utf-8"
    )
    assert render_json("team.yaml", "--agent", "lead")["output"]["schema"] == SCHEMA
    assert render_json("team.yaml", "--agent", "helper")["output"]["schema"]["properties"] == {
        "x": {"type": "string"}
    }


# ----------------------------------------------------------------- render


def test_render_on_the_fast_path_asks_with_response_format() -> None:
    file = agent("a", json.dumps(SCHEMA), model="{id: openai/scripted, api_base: 'http://127.0.0.1:9/v1'}")
    rendered = render_json(file)
    assert rendered["output"]["strategy"] == "response_format"
    assert rendered["params"]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "a", "schema": SCHEMA, "strict": True},
    }
    assert not rendered["tools"]
    text = invoke("render", file).stdout
    assert "# output: response_format json_schema 'a' (strict)" in text
    assert "--- output schema ---\n" + json.dumps(SCHEMA, indent=2) in text
    assert "--- response_format ---" in text


def test_render_for_a_provider_that_cannot_combine_tools_and_a_schema_shows_the_final_answer_tool() -> None:
    # litellm would force its own json tool for this model (tests/models/test_output_providers.py),
    # so the answer is a final_answer call beside the agent's tools
    file = agent(
        "a", json.dumps(SCHEMA), model="anthropic/claude-3-5-haiku-latest", extra="prompts: {system: Hi.}\n"
    )
    rendered = render_json(file)
    assert rendered["mode"] == "native" and rendered["output"]["strategy"] == "tool"
    assert "response_format" not in rendered["params"]
    (tool,) = rendered["tools"]
    assert tool["function"]["name"] == "final_answer" and tool["function"]["parameters"] == {
        "type": "object",
        "properties": {"city": {"type": "string"}, "temp": {"type": "number"}},
        "additionalProperties": False,
        "required": ["city", "temp"],
    }
    assert "call the `final_answer` tool" in rendered["messages"][0]["content"]
    assert "# output: a final-answer tool, final_answer" in invoke("render", file).stdout


@pytest.mark.parametrize("mode", ["inline", "prompt"])
def test_render_in_text_modes_asks_for_json_in_the_system_prompt(mode: str) -> None:
    file = agent("a", json.dumps(SCHEMA), extra=f"function_calling: {mode}\nprompts: {{system: Hi.}}\n")
    rendered = render_json(file)
    assert rendered["mode"] == mode and rendered["output"]["strategy"] == "text"
    assert rendered["params"] == {} and not rendered["tools"]
    system = rendered["messages"][0]["content"]
    assert system.startswith("Hi.\n\n## Final answer\n")
    assert "reply with only a JSON value that matches this JSON Schema" in system
    assert json.dumps(SCHEMA, indent=2) in system
    assert "# output: JSON in the reply, as the system prompt asks" in invoke("render", file).stdout


# ----------------------------------------------------------------- no heavy imports


def _imported(tmp_path: Path, *args: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "runner", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    names = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "typer" in names and "runner" in names  # the importtime output was read
    return names


def test_validate_and_render_with_output_import_no_heavy_module(tmp_path: Path) -> None:
    Path("s.yaml").write_text("type: object\nproperties:\n  a: {type: string}\n", encoding="utf-8")
    fast = "{id: openai/scripted, api_base: 'http://127.0.0.1:9/v1'}"
    files = [
        agent("i", json.dumps(SCHEMA), model=fast),
        agent("f", "{file: s.yaml}", model=fast),
        agent("t", json.dumps(SCHEMA), model="anthropic/claude-sonnet-4-5"),
    ]
    heavy = {"litellm", "mcp", "starlette", "openai", "uvicorn", "ray"}
    # no pydantic either: only a `python:` model needs it, and no httpx: validate opens nothing
    assert (heavy | {"httpx", "pydantic"}) & _imported(tmp_path, "validate", *files) == set()
    Path("types_mod.py").write_text(MODELS, encoding="utf-8")
    model = agent("m", "{python: types_mod:Forecast}", model=fast)
    assert heavy & _imported(tmp_path, "validate", model) == set()
    for file in [*files, model]:
        assert heavy & _imported(tmp_path, "render", file) == set(), file
