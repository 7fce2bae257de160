"""Mutated valid agent files never crash ``runner validate`` (SPEC section 15: no traceback, exit 0 or 2).

Each example takes one valid fixture file, applies a few random mutations (delete a line, duplicate a
line, change a value's type, cut the file, insert random bytes including NUL / tab / non-ASCII, change
a line's indentation) and writes the result next to the original, so that its relative paths
(``extends``, ``python:`` tools, template files) still point at real files.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from runner.cli import main

GOOD = Path(__file__).resolve().parent.parent / "fixtures" / "good"
SOURCES = sorted(p.relative_to(GOOD).as_posix() for p in GOOD.rglob("*.yaml"))

_VALUES = [
    "5",
    "-1",
    "2.5",
    "true",
    "null",
    "[]",
    "[a, 1]",
    "{}",
    "{a: 1}",
    '""',
    "x",
    "${RUNNER_FUZZ_UNSET}",
    "&a [*a]",
    "*nope",
    "!!int x",
    "|",
    "'",
    '"',
    "{{ x",
    "@",
    "0x10",
    "2024-01-01",
]
_BYTES = st.one_of(
    st.binary(min_size=1, max_size=8),
    st.sampled_from(
        [
            b"\x00",
            b"\t",
            b"\t\t",
            b"\xef\xbb\xbf",
            b"\xff",
            b"\r",
            b"\n  ",
            b": ",
            b"- ",
            b"#",
            b"&x ",
            b"*x",
            b"{",
            b"]",
            "é€😀".encode(),
            "\u2028".encode(),
            b"${",
            b"$${",
            b"{{",
            b"{%",
        ]
    ),
)


@st.composite
def _mutation(draw: st.DrawFn, data: bytes) -> bytes:
    lines = data.split(b"\n")
    kind = draw(st.sampled_from(["delete", "duplicate", "retype", "cut", "insert", "indent"]))
    i = draw(st.integers(0, max(len(lines) - 1, 0)))
    if kind == "delete" and len(lines) > 1:
        del lines[i]
    elif kind == "duplicate":
        lines.insert(i, lines[i])
    elif kind == "retype" and b": " in lines[i]:
        key = lines[i].split(b": ", 1)[0]
        lines[i] = key + b": " + draw(st.sampled_from(_VALUES)).encode()
    elif kind == "indent":
        stripped = lines[i].lstrip(b" \t")
        lines[i] = draw(st.sampled_from([b"", b" ", b"   ", b"\t", b"  \t", b"      "])) + stripped
    elif kind == "cut":
        return data[: draw(st.integers(0, len(data)))]
    else:
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(_BYTES) + data[at:]
    return b"\n".join(lines)


@st.composite
def _mutant(draw: st.DrawFn) -> tuple[str, bytes]:
    source = draw(st.sampled_from(SOURCES))
    data = (GOOD / source).read_bytes()
    for _ in range(draw(st.integers(1, 3))):
        data = draw(_mutation(data))
    return source, data


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("fuzz") / "good"
    shutil.copytree(GOOD, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(
    mutant=(
        "weather.yaml",
        b"version: 1\nname: weather\nextends: ./layers/middle.yaml\nprompts:\n  user: {}\n",
    )
)  # found by this test: a template mapping without `file`, over an extends chain, was a KeyError
@given(mutant=_mutant())
def test_mutated_files_never_crash_validate(
    mutant: tuple[str, bytes], workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(main._state, "debug", False)
    source, data = mutant
    path = (workspace / source).with_name("mutant.yaml")
    path.write_bytes(data)
    result = CliRunner().invoke(main.app, ["validate", str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 2), result.output
    assert "Traceback" not in result.output
    assert "internal error" not in result.output
    if result.exit_code == 2:
        assert result.output.strip(), "an invalid file must say why"
