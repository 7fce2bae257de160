"""Reading YAML with positions (``runner.agentfile.yamlsrc``): the source map and the refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.agentfile.yamlsrc import MAX_DEPTH, format_path, load_document
from runner.errors import ConfigError, ConfigErrors


def _write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "agent.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _errors(path: Path, env: dict[str, str] | None = None) -> list[ConfigError]:
    with pytest.raises(ConfigError) as caught:
        load_document(path, env=env or {})
    return list(caught.value) if isinstance(caught.value, ConfigErrors) else [caught.value]


def test_source_map_has_the_position_of_every_value_and_key(tmp_path: Path) -> None:
    path = _write(tmp_path, "version: 1\nname: a\ntools:\n  - builtin: time\n    id: clock\n")
    doc = load_document(path, env={})
    info = doc.sources.entries[("tools", 0, "id")]
    assert (info.file, info.line, info.column, info.key_line, info.key_column) == (str(path), 5, 9, 5, 5)
    assert doc.sources.entries[("tools", 0)].line == 4
    key = doc.sources.key(("tools", 0, "id"))
    assert key is not None and (key.line, key.column) == (5, 5)


def test_position_of_a_missing_path_is_its_nearest_ancestor(tmp_path: Path) -> None:
    doc = load_document(_write(tmp_path, "version: 1\nname: a\nmodel:\n  id: m\n"), env={})
    info = doc.sources.value(("model", "temperature"))
    assert info is not None and (info.line, info.column) == (4, 3)


def test_block_scalars_are_marked(tmp_path: Path) -> None:
    doc = load_document(_write(tmp_path, "prompts:\n  system: |\n    hi\n  user: hi\n"), env={})
    assert doc.sources.entries[("prompts", "system")].block_scalar
    assert not doc.sources.entries[("prompts", "user")].block_scalar


def test_dates_become_text(tmp_path: Path) -> None:
    doc = load_document(_write(tmp_path, "vars: {day: 2024-05-01}\n"), env={})
    assert doc.data == {"vars": {"day": "2024-05-01"}}


def test_every_duplicate_key_is_reported(tmp_path: Path) -> None:
    errors = _errors(_write(tmp_path, "a: 1\nb: 2\na: 3\nm: {x: 1, x: 2}\n"))
    assert [(e.line, e.column, e.path) for e in errors] == [(3, 1, "a"), (4, 11, "m.x")]


def test_merge_key_values_lose_to_the_mapping_own_keys(tmp_path: Path) -> None:
    text = "base: &b {a: 1, b: 2}\nother: &o {b: 3, c: 4}\nm:\n  <<: [*b, *o]\n  a: 0\n"
    doc = load_document(_write(tmp_path, text), env={})
    assert doc.data["m"] == {"a": 0, "b": 2, "c": 4}


@pytest.mark.parametrize(
    "text",
    ["a: &a [*a]\n", "a: &a\n  b: *a\n", "a: &a\n  <<: *a\n", "a: &a\n  - b: [*a]\n"],
    ids=["list", "mapping", "merge", "nested"],
)
def test_recursive_alias_is_an_error_not_a_crash(tmp_path: Path, text: str) -> None:
    (error,) = _errors(_write(tmp_path, text))
    assert error.message == "an alias refers to a value that contains it (a recursive anchor)"


def test_shared_alias_that_is_not_recursive_is_fine(tmp_path: Path) -> None:
    doc = load_document(_write(tmp_path, "a: &a [1]\nb: [*a, *a]\nc: {x: *a}\n"), env={})
    assert doc.data == {"a": [1], "b": [[1], [1]], "c": {"x": [1]}}


def test_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    path = _write(tmp_path, "\n".join(lines) + "\n")
    (error,) = _errors(path)
    assert "alias expansion bomb" in error.message


def test_nesting_deeper_than_the_limit_is_refused(tmp_path: Path) -> None:
    ok = "a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n"
    assert load_document(_write(tmp_path, ok), env={}).data["a"] is not None
    text = "a:\n" + "".join("  " * (i + 1) + "-\n" for i in range(MAX_DEPTH + 5))
    (error,) = _errors(_write(tmp_path, text))
    assert error.message == f"values are nested more than {MAX_DEPTH} levels deep"
    assert error.path == "a"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("!!int ten", "invalid !!int value: 'ten'"),
        ("!!float x", "invalid !!float value: 'x'"),
        ("!!bool maybe", "invalid !!bool value: 'maybe'"),
        ("!!timestamp soon", "invalid !!timestamp value: 'soon'"),
        ("!custom x", "unsupported YAML tag '!custom'"),
        ("!!python/name:os.system x", "unsupported YAML tag '!!python/name:os.system'"),
        ("!!python/object/apply:os.system [ls]", "unsupported YAML tag '!!python/object/apply:os.system'"),
        ("!custom {a: 1}", "unsupported YAML tag '!custom'"),
        ("!!binary aGVsbG8=", "binary (!!binary) values are not supported"),
    ],
)
def test_tags_that_are_not_plain_values_are_errors(tmp_path: Path, value: str, message: str) -> None:
    (error,) = _errors(_write(tmp_path, f"version: 1\nv: {value}\n"))
    assert (error.line, error.column, error.path, error.message) == (2, 4, "v", message)


def test_standard_collection_tags_are_accepted(tmp_path: Path) -> None:
    doc = load_document(_write(tmp_path, "a: !!map {x: 1}\nb: !!seq [1]\nc: !!set {x}\n"), env={})
    assert doc.data == {"a": {"x": 1}, "b": [1], "c": {"x": None}}


def test_byte_order_mark_is_skipped(tmp_path: Path) -> None:
    doc = load_document(_write(tmp_path, b"\xef\xbb\xbfname: a\n"), env={})
    assert doc.data == {"name": "a"}
    assert doc.sources.entries[("name",)].column == 7


def test_invalid_utf8_is_located(tmp_path: Path) -> None:
    (error,) = _errors(_write(tmp_path, b"a: 1\nb: \xc3\xa9\xe9\n"))  # a valid "é", then a latin-1 one
    assert (error.line, error.column) == (2, 5)
    assert error.message == "not valid UTF-8 text (byte 0xe9)"


def test_missing_file_and_directory_are_clear_errors(tmp_path: Path) -> None:
    (missing,) = _errors(tmp_path / "nope.yaml")
    assert missing.message == "file not found"
    (folder,) = _errors(tmp_path)
    assert folder.message == "is a directory, not an agent file"


def test_interpolation_error_is_located_at_its_value(tmp_path: Path) -> None:
    (error,) = _errors(_write(tmp_path, "name: a\nmodel:\n  id: ${RUNNER_T_UNSET}\n"))
    assert (error.line, error.column, error.path) == (3, 7, "model.id")


def test_keys_are_not_interpolated(tmp_path: Path) -> None:
    doc = load_document(_write(tmp_path, "vars: {'${X}': 1}\n"), env={"X": "y"})
    assert doc.data == {"vars": {"${X}": 1}}


def test_yaml_error_names_where_an_unclosed_value_starts(tmp_path: Path) -> None:
    (error,) = _errors(_write(tmp_path, 'a: 1\nb: "open\nc: 2\n'))
    assert (error.line, error.column) == (4, 1)
    assert "quoted scalar that starts at line 2, column 4" in error.message


@pytest.mark.parametrize(
    ("path", "text"), [((), ""), (("a",), "a"), (("tools", 2, "mcp"), "tools[2].mcp"), ((0, "x"), "[0].x")]
)
def test_format_path(path: tuple[str | int, ...], text: str) -> None:
    assert format_path(path) == text


def test_device_file_is_refused_without_reading_it() -> None:
    (error,) = _errors(Path("/dev/zero"))
    assert error.message == "not a regular file"


def test_control_character_is_located(tmp_path: Path) -> None:
    (error,) = _errors(_write(tmp_path, "a: 1\nb: x\x07y\n"))
    assert (error.line, error.column) == (2, 5)
    assert error.message.startswith("YAML syntax error: character U+0007 is not allowed")


def test_own_key_written_before_a_merge_keeps_its_position(tmp_path: Path) -> None:
    text = "x: &a {t: 0.5, r: 1}\nm:\n  t: 9\n  <<: *a\n"
    doc = load_document(_write(tmp_path, text), env={})
    assert doc.data["m"] == {"t": 9, "r": 1}
    assert (doc.sources.entries[("m", "t")].line, doc.sources.entries[("m", "t")].column) == (3, 6)
    assert doc.sources.entries[("m", "r")].line == 1
