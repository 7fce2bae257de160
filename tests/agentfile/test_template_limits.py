"""Hostile templates are refused quickly, with a located error and exit 2 (issue 12, "Templates").

Each payload below ran for seconds to forever, or took gigabytes, in Jinja's plain sandbox. They are
performed through the real command (``runner render`` / ``validate`` / ``run``), and must end with
exit code 2 and one ``FILE:LINE:COL`` line naming the limit, well inside a generous time bound; a
few run in a subprocess whose peak memory is measured.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from runner.agentfile.config import TemplateSource
from runner.agentfile.files import check_file
from runner.agentfile.interpolate import retype
from runner.agentfile.sandbox import BoundedSandbox, TemplateLimitError, TemplateLimits, metered
from runner.agentfile.templates import TemplateEngine
from runner.cli import main
from runner.errors import ConfigError

#: Generous: the payloads end in well under a second in-process; the machine may be loaded.
SECONDS = 10.0
MEGABYTE = 1024 * 1024

HEADER = "version: 1\nname: hostile\nmodel:\n  id: openai/scripted\n  api_base: http://127.0.0.1:9/v1\n"
HEADER += "vars:\n  n: 1000000000\n  big: 99999\n"
SYSTEM_LINE = 10  # the line of `system:` in an agent written by `write_agent`

#: (id, template, what the error says). ``n`` and ``big`` are variables, so these reach the render.
RENDER_PAYLOADS = [
    (
        "nested_ranges",
        "{% for a in range(big) %}{% for b in range(big) %}{% endfor %}{% endfor %}",
        "more than 250,000 steps",
    ),
    (
        "nested_lists",
        "{% set r = range(big)|list %}{% for a in r %}{% for b in r %}{% endfor %}{% endfor %}",
        "steps",
    ),
    (
        "doubling_concat",
        "{% set ns = namespace(s='x') %}{% for i in range(big % 100) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}{{ ns.s|length }}",
        "characters",
    ),
    (
        "exponential_macro",
        "{% macro f(k) %}{% if k %}{{ f(k-1) }}{{ f(k-1) }}{% endif %}{% endmacro %}{{ f(big % 100) }}",
        "steps",
    ),
    (
        "endless_macro",
        "{% macro f(k) %}{{ f(k+1) }}{% endmacro %}{{ f(n) }}",
        "calls nest more than 100 deep",
    ),
    (
        "recursive_loop",
        "{% for x in [1] recursive %}{{ loop(range(big)) }}{% endfor %}",
        "calls nest more than 100 deep",
    ),
    ("extend_doubling", "{% set l = [1] %}{% for i in range(60) %}{{ l.extend(l) }}{% endfor %}", "items"),
    (
        "append_copies",
        "{% set l = range(big)|list %}{% set a = [] %}{% for i in range(big) %}{{ a.append(l.copy()) }}"
        "{% endfor %}",
        "steps",
    ),
    (
        "append_strings",
        "{% set s = 'x' * big %}{% set a = [] %}{% for i in range(big) %}{{ a.append(s ~ i) }}{% endfor %}",
        "a template may build at most 50,000,000 characters",
    ),
    ("string_times_n", "{{ ' ' * n }}", "a string times 1000000000 would build a string of 1,000,000,000"),
    ("list_times_n", "{{ [0] * n }}", "a list times 1000000000 would make 1,000,000,000 items"),
    ("power", "{{ n ** n }}", "would have more than 10,000 bits"),
    ("center_n", "{{ ' '|center(n) }}", "center(1000000000) would build"),
    ("ljust_n", "{{ 'a'.ljust(n) }}", "ljust(1000000000) would build"),
    ("zfill_n", "{{ '1'.zfill(n) }}", "zfill(1000000000) would build"),
    ("to_bytes_n", "{{ (1).to_bytes(n, 'big')|length }}", "to_bytes(1000000000)"),
    ("replace_blowup", "{% set s = 'x' * big %}{{ s|replace('x', s) }}", "replace would build"),
    ("join_blowup", "{{ ('x' * big).join(range(big)|map('string')) }}", "join would build"),
    ("join_filter", "{{ range(big)|join('x' * big) }}", "join would build"),
    ("format_width", "{{ '{:>{}}'.format(1, n) }}", "a format field of width 1000000000"),
    ("percent_star", "{{ '%*d' % (n, 1) }}", "% would build"),
    ("format_filter", "{{ '%*s'|format(n, 'x') }}", "format would build"),
    ("indent_string", "{{ ('a\\n' * big)|indent('x' * big) }}", "indent would build"),
    ("wordwrap", "{{ ('a ' * big)|wordwrap(1, wrapstring='x' * big) }}", "wordwrap would build"),
    ("translate", "{{ ('a' * big).translate({97: 'b' * big}) }}", "translate would build"),
    ("expandtabs", "{{ ('\\t' * big).expandtabs(big) }}", "expandtabs would build"),
    ("tojson_indent", "{{ [[[[[[1]]]]]]|tojson(indent=n) }}", "tojson(indent=1000000000)"),
    ("batch_fill", "{{ [1]|batch(n, 'x')|list|length }}", "batch(1000000000, fill_with)"),
    ("slice_n", "{{ [1]|slice(n)|list|length }}", "slice(1000000000)"),
    ("sum_lists", "{% set l = [[1] * 999] * 999 %}{{ (l|sum(start=[]))|length }}", "sum would make"),
    ("lipsum", "{{ lipsum(100, min=n, max=n) }}", "lipsum would build"),
    ("range_n", "{{ range(n)|list|length }}", "range of 1,000,000,000 items"),
    (
        "output_flood",
        "{% set s = 'y' * big %}{% for i in range(big) %}{{ s }}{% endfor %}",
        "output is longer than 10,000,000 characters",
    ),
]


def write_agent(folder: Path, system: str, *, name: str = "agent.yaml") -> Path:
    path = folder / name
    path.write_text(HEADER + "prompts:\n  system: " + json.dumps(system) + "\n", encoding="utf-8")
    return path


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    result = CliRunner().invoke(main.app, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert "internal error" not in result.output
    return result


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(main._state, "debug", False)


@pytest.fixture(scope="module")
def warm_render(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One plain render first, so that import time does not count in the timed ones."""
    folder = tmp_path_factory.mktemp("warm")
    assert invoke("render", str(write_agent(folder, "hello {{ n }}"))).exit_code == 0


def test_there_are_many_distinct_render_payloads() -> None:
    assert len({template for _, template, _ in RENDER_PAYLOADS}) >= 30


@pytest.mark.parametrize(
    ("template", "message"), [p[1:] for p in RENDER_PAYLOADS], ids=[p[0] for p in RENDER_PAYLOADS]
)
def test_render_refuses_the_payload_quickly_with_a_located_error(
    template: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, warm_render: None
) -> None:
    write_agent(tmp_path, template)
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    result = invoke("render", "agent.yaml")
    elapsed = time.monotonic() - started
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.startswith(f"agent.yaml:{SYSTEM_LINE}:")]
    assert lines, result.output
    # a loaded machine can reach the template's time budget before its step budget: both are the
    # located refusal checked here (test_the_step_budget_counts_loop_iterations checks steps, no clock)
    timed_out = "steps" in message and "the template ran for more than" in lines[0]
    assert message in lines[0] or timed_out, lines[0]
    assert elapsed < SECONDS


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ ' '|center(10**9) }}", "center(1000000000) would build a string of 1,000,000,000 characters"),
        ("{{ 'x' * 10**9 }}", "a string times 1000000000"),
        ("{{ '%999999999d' % 1 }}", "% would build"),
        ("{{ '{:>999999999}'.format(1) }}", "a format field of width 999999999"),
        ("{{ 'a'.rjust(10**9) }}", "rjust(1000000000)"),
        ("{{ 7 ** 1000000 }}", "7 ** 1000000 would have more than 10,000 bits"),
        ("{{ x|defcult('a') }}", "unknown filter 'defcult' (did you mean 'default'?)"),
        ("{% if x is evne %}{% endif %}", "unknown test 'evne' (did you mean 'even'?)"),
    ],
)
def test_validate_reports_constant_payloads_without_building_them(
    template: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_agent(tmp_path, template.replace("x|", "n|").replace("x is", "n is"))
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    result = invoke("validate", "agent.yaml")
    assert time.monotonic() - started < SECONDS
    assert result.exit_code == 2, result.output
    assert any(
        line.startswith(f"agent.yaml:{SYSTEM_LINE}:11: prompts.system: template: ") and message in line
        for line in result.output.splitlines()
    ), result.output


def _peak(*args: str, cwd: Path) -> tuple[int, str, int]:
    """Run ``runner ARGS`` in a child of a fresh process; its exit code, stderr and peak memory (bytes)."""
    wrapper = (
        "import resource, subprocess, sys\n"
        "r = subprocess.run([sys.executable, '-m', 'runner', *sys.argv[1:]],\n"
        "                   capture_output=True, text=True)\n"
        "sys.stdout.write(r.stdout + r.stderr)\n"
        "print(f'@@{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}')\n"
        "sys.exit(r.returncode)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", wrapper, *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )
    output, _, peak = result.stdout.rpartition("@@")
    return result.returncode, output, int(peak) * 1024


def test_validate_of_center_a_billion_stays_small_in_a_real_process(tmp_path: Path) -> None:
    write_agent(tmp_path, "{{ ' '|center(10**9) }}")
    started = time.monotonic()
    code, output, peak = _peak("validate", "agent.yaml", cwd=tmp_path)
    assert time.monotonic() - started < SECONDS
    assert code == 2, output
    assert f"agent.yaml:{SYSTEM_LINE}:11: prompts.system: template: center(1000000000)" in output
    assert peak < 300 * MEGABYTE  # it was ~3 GB


def test_render_of_a_runaway_template_stays_small_in_a_real_process(tmp_path: Path) -> None:
    write_agent(
        tmp_path, "{% set s = ' ' * big %}{% for i in range(big) %}{{ s ~ s }}{% endfor %}{{ ' ' * n }}"
    )
    code, output, peak = _peak("render", "agent.yaml", cwd=tmp_path)
    assert code == 2, output
    assert f"agent.yaml:{SYSTEM_LINE}:" in output and "characters" in output
    assert peak < 800 * MEGABYTE


def test_run_with_a_hostile_user_template_exits_2_before_calling_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "agent.yaml").write_text(HEADER + "prompts:\n  user: \"{{ input ~ ' ' * n }}\"\n")
    monkeypatch.chdir(tmp_path)
    result = invoke("run", "agent.yaml", "-p", "hi", env={"RUNNER_HOME": str(tmp_path / "home")})
    assert result.exit_code == 2, result.output
    assert f"agent.yaml:{SYSTEM_LINE}:1: template: a string times 1000000000" in result.output


# --- the size of a template's source ---------------------------------------------------------------


def test_a_60_mb_template_file_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "huge.j2").write_bytes(b"{{ a }} and {% if b %}c{% endif %}\n" * 1_800_000)
    (tmp_path / "agent.yaml").write_text(HEADER + "prompts:\n  system: {file: huge.j2}\n")
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    result = invoke("validate", "agent.yaml")
    assert time.monotonic() - started < SECONDS  # it took 18 s
    assert result.exit_code == 2, result.output
    assert (
        f"agent.yaml:{SYSTEM_LINE}:18: prompts.system.file: template file huge.j2 is too large"
        in result.output
    )


def test_an_included_file_over_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "part.j2").write_text("x" * 1_000_001)
    write_agent(tmp_path, "{% include 'part.j2' %}")
    monkeypatch.chdir(tmp_path)
    result = invoke("validate", "agent.yaml")
    assert result.exit_code == 2, result.output
    assert "template includes 'part.j2': template file part.j2 is 1,000,001 bytes" in result.output


def test_a_computed_include_over_the_limit_is_refused_at_render(tmp_path: Path) -> None:
    (tmp_path / "part.j2").write_text("x" * 1_000_001)
    engine = TemplateEngine(tmp_path)
    source = TemplateSource("{% include name %}", origin=tmp_path / "agent.yaml", line=4)
    with pytest.raises(ConfigError, match=r"part\.j2 is 1,000,001 bytes") as caught:
        engine.render(source, {"name": "part.j2"})
    assert caught.value.line == 4


def test_an_inline_template_over_the_size_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_agent(tmp_path, "x" * 1_000_001)
    monkeypatch.chdir(tmp_path)
    result = invoke("validate", "agent.yaml")
    assert result.exit_code == 2
    assert "the template is 1,000,001 characters long: the limit is 1,000,000" in result.output


def test_a_template_of_too_many_tokens_is_refused_quickly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_agent(tmp_path, "{{ a }}{% if b %}c{% endif %}\n" * 30_000)  # under the size limit, dense with tags
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    result = invoke("validate", "agent.yaml")
    assert time.monotonic() - started < SECONDS
    assert result.exit_code == 2
    assert "the template has more than 50,000 tokens" in result.output


# --- the sandbox, unit by unit ---------------------------------------------------------------------


def test_ordinary_templates_render_as_before(tmp_path: Path) -> None:
    engine = TemplateEngine(tmp_path)
    text = (
        "{% for t in tools %}- {{ t.name|upper }}: "
        "{{ t.description|default('none')|truncate(20) }}\n{% endfor %}"
        "{{ '%s has %d tools'|format(agent, tools|length) }} {{ ', '.join(vars.keys()) }} {{ 'x' * 3 }}"
        "{{ '{:>5}'.format(7) }} {{ 2 ** 10 }} {{ range(3)|list }} {{ [1, 2] + [3] }} {{ 'a' ~ 'b' }}"
    )
    context = {
        "tools": [{"name": "add", "description": "Add two numbers."}, {"name": "now"}],
        "agent": "calc",
        "vars": {"a": 1, "b": 2},
    }
    out = engine.render(TemplateSource(text, origin=tmp_path / "a.yaml"), context)
    assert out == (
        "- ADD: Add two numbers.\n- NOW: none\ncalc has 2 tools a, b xxx    7 1024 [0, 1, 2] [1, 2, 3] ab"
    )


def test_the_step_budget_counts_loop_iterations() -> None:
    env = BoundedSandbox(limits=TemplateLimits(steps=1_000))
    assert env.from_string("{% for i in range(900) %}{% endfor %}ok").render() == "ok"
    with pytest.raises(TemplateLimitError) as caught:
        env.from_string("{% for i in range(30) %}{% for j in range(40) %}{% endfor %}{% endfor %}").render()
    assert caught.value.limit == "steps"


def test_each_render_gets_a_fresh_budget() -> None:
    env = BoundedSandbox(limits=TemplateLimits(steps=1_000))
    template = env.from_string("{% for i in range(600) %}{% endfor %}ok")
    assert [template.render() for _ in range(5)] == ["ok"] * 5


def test_the_time_limit_is_a_backstop() -> None:
    env = BoundedSandbox(limits=TemplateLimits(seconds=0.0))
    with pytest.raises(TemplateLimitError) as caught:
        env.from_string("{% for i in range(10) %}{% endfor %}").render()
    assert caught.value.limit == "seconds"


def test_compile_time_folding_is_bounded_too() -> None:
    env = BoundedSandbox()
    started = time.monotonic()
    with metered(env.limits):
        template = env.from_string(
            "{{ ' '|center(1000000000) }}"
        )  # a literal: Jinja folds filters of constants
    assert time.monotonic() - started < SECONDS
    with pytest.raises(TemplateLimitError, match="center"):
        template.render()


def test_the_modes_prompt_templates_use_the_bounded_sandbox() -> None:
    from runner.modes.templates import prompt_environment

    with pytest.raises(TemplateLimitError):
        prompt_environment().from_string("{{ 'x' * n }}").render(n=10**9)


# --- long numbers from the environment and --var -----------------------------------------------------

DIGITS = "1" * 5000


def test_a_var_of_5000_digits_stays_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_agent(tmp_path, "[{{ n }}]")
    monkeypatch.chdir(tmp_path)
    result = invoke("render", "agent.yaml", "--var", f"n={DIGITS}")
    assert result.exit_code == 0, result.output
    assert f"[{DIGITS}]" in result.output
    hexa = invoke("render", "agent.yaml", "--var", "n=0x" + "f" * 3600)  # 4,336 digits as a number
    assert hexa.exit_code == 0, hexa.output
    assert "[0x" + "f" * 3600 + "]" in hexa.output


def test_an_env_value_of_5000_digits_stays_text_and_a_typed_key_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "agent.yaml").write_text(
        HEADER.replace("  n: 1000000000\n", "  n: ${BIG}\n") + "limits:\n  max_steps: ${BIG}\n"
    )
    monkeypatch.chdir(tmp_path)
    result = invoke("validate", "agent.yaml", env={"BIG": DIGITS})
    assert result.exit_code == 2, result.output
    (line,) = [line for line in result.output.splitlines() if "max_steps" in line]
    assert line.startswith("agent.yaml:10:14: limits.max_steps: expected an integer")


def test_retype_keeps_numbers_it_cannot_print_as_text() -> None:
    assert retype("42") == 42
    assert retype("0x" + "f" * 3000) == "0x" + "f" * 3000  # over 1,000 characters
    assert retype(DIGITS) == DIGITS
    assert retype("1" * 999) == int("1" * 999)


def test_a_literal_integer_too_big_to_print_is_a_located_error(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(HEADER + "  huge: 0x" + "f" * 4000 + "\n")
    (error,) = check_file(path, env={})
    assert (error.line, error.column, error.path) == (9, 9, "vars.huge")
    assert error.message.startswith("integer too large to use")


# --- paths ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("a" * 300, "cannot use the extends path: File name too long"),
        ("a/" * 3000, "it is 6,000 characters long"),
        ("a\\tb", "it contains a control character"),
    ],
)
def test_extends_paths_no_file_can_have_are_located_errors(target: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(f'version: 1\nname: x\nextends: "{target}"\n')
    (error,) = check_file(path, env={})
    assert (error.line, error.column, error.path) == (3, 10, "extends")
    assert message in error.message


def test_a_yaml_file_of_too_many_nodes_is_refused_before_it_is_composed(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    rows = "".join(f"  v{i}: [a, b, c, d, e, f, g, h]\n" for i in range(30_000))
    path.write_text("version: 1\nname: x\nvars:\n" + rows)
    started = time.monotonic()
    (error,) = check_file(path, env={})
    assert time.monotonic() - started < SECONDS  # a 5 MB file took 10 s
    assert error.message.startswith("the file holds more than 200,000 keys and values")
    assert error.line > 3


def test_the_format_reference_states_the_limits_the_code_applies() -> None:
    from runner.resources import load_schema

    text = load_schema()["$defs"]["prompts"]["description"]
    limits = TemplateLimits()
    for number in (
        limits.source_chars,
        limits.source_tokens,
        limits.steps,
        limits.built_chars,
        limits.output_chars,
        limits.range_items,
        limits.int_bits,
    ):
        assert f"{number:,}" in text
    assert f"nest calls {limits.depth} deep" in text
    assert f"run for {limits.seconds:g} seconds" in text


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ now('%c' * big) }}", "now(): the format has 199,998 characters"),
        ("{{ ('&' * 9999999)|e }}", "e would build a string of 59,999,994 characters"),
        ("{{ ('ß' * 20000000).upper() }}", "upper would build a string of 60,000,000 characters"),
        ("{{ ('x' * 20000000).encode('utf-32') }}", "encode would build a string of 80,000,000 characters"),
    ],
)
def test_operations_that_multiply_text_are_refused_first(template: str, message: str, tmp_path: Path) -> None:
    engine = TemplateEngine(tmp_path)
    with pytest.raises(ConfigError, match=re.escape(message)):
        engine.render(TemplateSource(template, origin=tmp_path / "agent.yaml"), {"big": 99999})


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ('"\\x00"', "cannot read template file '\\x00': embedded null byte"),
        ("folder", "template file folder is a directory"),
        ('"' + "a" * 300 + '"', "File name too long"),
    ],
)
def test_template_file_paths_no_file_can_have_are_located_errors(
    target: str, message: str, tmp_path: Path
) -> None:
    (tmp_path / "folder").mkdir()
    path = tmp_path / "agent.yaml"
    path.write_text(f"version: 1\nname: x\nprompts:\n  system: {{file: {target}}}\n")
    (error,) = check_file(path, env={})
    assert (error.line, error.column, error.path) == (4, 18, "prompts.system.file")
    assert message in error.message


@pytest.mark.parametrize(
    "template",
    [
        "{{ ('{:>999999999}'|safe).format(1) }}",
        "{{ ('%999999999d'.encode()) % 1 }}",
        "{% autoescape true %}{% set ns = namespace(s='x' * 9999) %}{% for i in range(40) %}"
        "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{% endautoescape %}",
    ],
    ids=["markup_format", "bytes_percent", "autoescape_concat"],
)
def test_markup_bytes_and_autoescape_do_not_slip_past_the_checks(template: str, tmp_path: Path) -> None:
    engine = TemplateEngine(tmp_path)
    with pytest.raises(ConfigError, match=r"would build a string of|would add"):
        engine.render(TemplateSource(template, origin=tmp_path / "agent.yaml"), {})


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ ('x' * 9999999)|list|length }}", "list of a text would make 9,999,999 items"),
        ("{{ ('x' * 9999999)|unique|list|length }}", "unique of a text would make 9,999,999 items"),
        ("{{ ('a ' * 9999999).split()|length }}", "split would make 10,000,000 items"),
        ("{{ ('a,' * 9999999).split(',')|length }}", "split would make 10,000,000 items"),
        ("{{ ('a\\n' * 9999999).splitlines()|length }}", "splitlines would make 10,000,000 items"),
        ("{{ ('a ' * 9999999)|title|length }}", "more than 250,000 steps"),
    ],
)
def test_a_long_text_cannot_become_millions_of_items(template: str, message: str, tmp_path: Path) -> None:
    engine = TemplateEngine(tmp_path)
    started = time.monotonic()
    with pytest.raises(ConfigError, match=re.escape(message)):
        engine.render(TemplateSource(template, origin=tmp_path / "agent.yaml"), {})
    assert time.monotonic() - started < SECONDS
