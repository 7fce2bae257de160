"""``${VAR}`` / ``${VAR:-default}`` interpolation (``runner.agentfile.interpolate``)."""

from __future__ import annotations

from typing import Any

import pytest

from runner.agentfile.interpolate import Interpolator, is_secret_name, retype
from runner.errors import ConfigError


def _expand(text: str, env: dict[str, str] | None = None, *, plain: bool = True) -> Any:
    return Interpolator(env or {}).expand(text, ("x",), plain=plain)


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("${N}", {"N": "7"}, 7),
        ("${N:-7}", {}, 7),
        ("${N:-2.5}", {}, 2.5),
        ("${N:-true}", {}, True),
        ("${N:-null}", {}, None),
        ("${N:-}", {}, ""),
        ("${N:-[1, 2]}", {}, "[1, 2]"),  # only scalars are retyped
        ("${N:-a: b}", {}, "a: b"),
        ("${N}", {"N": ""}, ""),
        ("${N:-7}", {"N": ""}, 7),  # as in the shell: `:-` takes the default for an empty value too
        ("x${N:-7}", {}, "x7"),
        ("${A:-1}${B:-2}", {}, "12"),
        ("$${N}", {"N": "7"}, "${N}"),
        ("$${N} ${N}", {"N": "7"}, "${N} 7"),
        ("cost: $5", {}, "cost: $5"),
        ("${N:-a:-b}", {}, "a:-b"),
    ],
)
def test_expand(text: str, env: dict[str, str], expected: Any) -> None:
    assert _expand(text, env) == expected


def test_quoted_whole_reference_is_not_retyped() -> None:
    assert _expand("${N:-7}", plain=False) == "7"


def test_set_variable_wins_over_default() -> None:
    assert _expand("${N:-7}", {"N": "8"}) == 8


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("${MISSING}", "environment variable MISSING is not set"),
        ("a ${MISSING} b", "environment variable MISSING is not set"),
        ("${OPEN", "unclosed '${' in a value"),
        ("${}", "malformed variable reference '${}'"),
        ("${1X}", "malformed variable reference '${1X}'"),
        ("${A B}", "malformed variable reference '${A B}'"),
        ("${A:-${B}}", "the default of ${A:-...} contains another '${'"),
    ],
)
def test_bad_references_are_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _expand(text)
    assert message in caught.value.message
    assert caught.value.hint


def test_unset_variable_hint_shows_a_default() -> None:
    with pytest.raises(ConfigError) as caught:
        _expand("${WEATHER_URL}")
    assert caught.value.hint == "set WEATHER_URL, or give a default: ${WEATHER_URL:-default}"


def test_secret_values_are_recorded_and_not_retyped() -> None:
    interpolator = Interpolator({"OPENAI_API_KEY": "123", "GH_TOKEN": "t", "DB_PASSWORD": "p", "PLAIN": "v"})
    assert interpolator.expand("${OPENAI_API_KEY}", ("a",), plain=True) == "123"
    interpolator.expand("Bearer ${GH_TOKEN} ${DB_PASSWORD} ${PLAIN}", ("b",), plain=True)
    assert interpolator.secrets == {"123", "t", "p"}
    assert interpolator.interpolated == {("a",), ("b",)}


def test_empty_secret_is_not_recorded() -> None:
    interpolator = Interpolator({})
    interpolator.expand("${OPENAI_API_KEY:-}", ("a",), plain=True)
    assert interpolator.secrets == set()


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("OPENAI_API_KEY", True),
        ("api_key", True),
        ("GITHUB_TOKEN", True),
        ("MY_SECRET", True),
        ("PGPASSWORD", True),
        ("MAX_STEPS", False),
        ("MONKEY_NAME", True),
    ],
)
def test_is_secret_name(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


@pytest.mark.parametrize(
    ("text", "value"), [("10", 10), ("1.5", 1.5), ("1e3", "1e3"), ("no", False), ("~", None), ("x", "x")]
)
def test_retype_reads_a_yaml_scalar(text: str, value: Any) -> None:
    assert retype(text) == value
