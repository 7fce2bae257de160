"""Permission rules against the real shell: an oracle, not expectations (issue 12, "Permission rules").

Logging shims for ``rm``, ``touch``, ``evil``, ``git`` and ``ls`` come first on the shell toolset's
``PATH``; each appends its name, the ``ZZ_*`` variables it sees and its arguments to a log. Command
lines (the issue's attacks, hand-written cases and lines generated over the shell grammar) run
through the real ``shell`` toolset and the session's permission gate, the way ``runner run`` runs
them:

- ``ALLOW``: ``allow: [shell(command=git *), shell(command=ls *)]``, not interactive, no ``--yes``:
  whatever runs must be ``git`` or ``ls`` without ``ZZ_*`` assignments, and then the rules said allow;
- ``DENY``: ``deny: [shell(command=rm *), shell(command=touch *), shell(command=evil *)]`` with
  ``--yes``: ``rm``, ``touch`` and ``evil`` must never run.

``/bin/rm`` and ``/usr/bin/touch`` bypass the shims, so every run also checks the files they would
change: the victim ``V`` must survive and the markers ``M``, ``X`` and ``PWNED`` must not appear.
A control run without rules shows that each attack is real (the oracle sees it).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from runner.agentfile import load_agent
from runner.runtime import AgentRuntime, RuntimeSettings
from runner.session import RunOptions, Session, open_runtime
from runner.testing import ScriptedModel, ScriptedServer, text, tool_call
from tests.tools.permission_checks import verdict

ROOT = Path(__file__).resolve().parents[2]
SHIMMED = ("rm", "touch", "evil", "git", "ls")
MARKERS = ("M", "X", "PWNED")

#: The issue's attacks: each ran what the rule forbids before.
ISSUE_ATTACKS = [
    "git --version #'\ntouch PWNED\n#'",
    "if true; then rm -f V; fi",
    "for f in x; do rm -f V; done",
    "{ rm -f V; }",
    "! rm -f V",
    "/bin/rm -f V",
    "ZZ_DIFF='touch X' git diff",
    "ZZ_COUNT=1 ZZ_KEY_0=alias.st ZZ_VALUE_0='!touch X' git st",
]

#: More ways to run a forbidden program: quoting, paths, wrappers, scripts, substitutions.
HAND_WRITTEN = [
    "git status; rm -f V",
    "git status && touch M",
    "git status || true; evil x",
    "git status | rm -f V",
    "git status & rm -f V",
    "git status\nrm -f V",
    "(rm -f V)",
    "( git status; (rm -f V) )",
    "while git status; do rm -f V; break; done",
    "until false; do touch M; break; done",
    "git log $(rm -f V)",
    "git log `touch M`",
    'git log "$(evil x)"',
    'git log "`rm -f V`"',
    "/usr/bin/touch M",
    "../bin/rm -f V",
    "./../bin/evil x",
    '"rm" -f V',
    "r''m -f V",
    "\\rm -f V",
    "'touch' M",
    "r\\\nm -f V",
    "ZZ_A=1 rm -f V",
    "env rm -f V",
    "env -i PATH=../bin rm -f V",
    "command rm -f V",
    "exec rm -f V",
    "nohup rm -f V",
    "xargs rm -f V",
    "time rm -f V",
    "timeout 5 rm -f V",
    "sh -c 'rm -f V'",
    "bash -c 'git status; touch M'",
    "env sh -c 'rm -f V'",
    "eval 'rm -f V'",
    'eval "touch M"',
    "R=rm; $R -f V",
    "R=rm\n${R} -f V",
    'set -- rm -f V; "$@"',
    "trap 'rm -f V' EXIT",
    "f() { rm -f V; }; f",
    "cat <<E\n$(rm -f V)\nE",
    "case x in x) rm -f V;; esac",
    "alias g=rm\ng -f V",
    "git log a#b; rm -f V",
    "git status #\\\nrm -f V",
    "echo 'rm -f V' | sh",
    "ls &> /dev/null; rm -f V",
    "ls &>/dev/null rm -f V",
    "/bin/r? -f V",
    "/bin/r[m] -f V",
    "PATH=../bin:$PATH; rm -f V",
    "find . -name V -exec rm -f {} +",
    "git log --format=x\n\nrm -f V",
    "{ git status; } > /dev/null; rm -f V",
    "R=rm; $\\\nR -f V",
    "command alias x=rm\nx -f V",
    "echo \"'rm -f V'\" | xargs sh -c",
    "echo 'rm -f V' | xargs -I X sh -c X",
    "echo 'touch M' > s; find . -name s -exec sh {} \\;",
]

#: Command-taking wrappers a Debian system ships (issue 23): each runs a forbidden program, for real,
#: where the wrapper is installed here (on the oracle's PATH, /usr/bin and /bin).
WRAPPED_BY_PROGRAM = [
    ("prlimit", "prlimit --nofile=64 rm -f V"),
    ("prlimit", "prlimit --nofile=64:64 -- touch M"),
    ("setpriv", "setpriv --reuid=0 rm -f V"),
    ("eatmydata", "eatmydata rm -f V"),
    ("ssh", "ssh -o ProxyCommand='rm -f V' nowhere"),
    ("ssh", "ssh -oProxyCommand=touch\\ M -p 22 nowhere ls"),
    ("ssh", "ssh -o 'ProxyCommand touch M' nowhere"),
    ("tmux", "tmux -S s new -d 'git status; rm -f V; tmux -S s wait-for -S d' \\; wait-for d"),
    ("tmux", "tmux -S s new-session -d -s w 'touch M; tmux -S s wait-for -S d' \\; wait-for d"),
    ("tmux", "tmux -c 'git status; touch M'"),
    ("sg", "sg root 'git status; touch M'"),
    ("sg", "sg root -c 'rm -f V'"),
    ("gdb", "gdb -batch -ex 'shell touch M'"),
    ("setsid", "setsid -w rm -f V"),
    ("choom", "choom -n 0 -- rm -f V"),
    ("setarch", "setarch x86_64 touch M"),
    ("linux64", "linux64 rm -f V"),
    ("ionice", "ionice -c 3 rm -f V"),
    ("taskset", "taskset 1 touch M"),
    ("chrt", "chrt -o 0 rm -f V"),
    ("unshare", "unshare -U rm -f V"),
    ("script", "script -qc 'git status; touch M' /dev/null"),
    ("su", "su -c 'git status; rm -f V'"),
    ("flock", "flock f rm -f V"),
    ("strace", "strace -o /dev/null -f touch M"),
    ("fakeroot", "fakeroot rm -f V"),
    ("dbus-run-session", "dbus-run-session -- rm -f V"),
    ("stdbuf", "stdbuf -o0 rm -f V"),
    ("nice", "nice -n 1 touch M"),
]
WRAPPED = [line for program, line in WRAPPED_BY_PROGRAM if shutil.which(program, path="/usr/bin:/bin")]

#: Lines whose forbidden part never runs (a branch not taken, a syntax error): judged all the same.
JUDGED_ONLY = [
    "if git status; then git diff; elif true; then :; else rm -f V; fi",
    "git st'atus; rm -f V",
]

#: Lines the allow rules do vouch for: they must run (the oracle is not vacuous).
ALLOWED = [
    ("git status", ["git"]),
    ("git status && ls -a", ["git", "ls"]),
    ("(git fetch; git status) > /dev/null 2>&1", ["git", "git"]),
    ("if git status; then ls -a; else :; fi", ["git", "ls"]),
    ("for f in a b; do git add $f; done", ["git", "git"]),
    ("git log $(git rev-parse HEAD) | ls -l", ["git", "git", "ls"]),
    ('"git" status # comment', ["git"]),
]

SHIM = """#!/bin/sh
printf '%s\\t%s\\t%s\\n' {name} "$(env | grep '^ZZ_' | tr '\\n' ',')" "$*" >> {log}
"""


@dataclass
class Outcome:
    """What one command line did."""

    line: str
    verdict: str | None
    result: str
    ran: list[tuple[str, str, str]]
    victim_alive: bool
    markers: list[str]


class Oracle:
    """One agent with the shell toolset (shims first on PATH) and rules; runs lines one per session."""

    def __init__(self, root: Path, permissions: str, *, yes: bool) -> None:
        self.root = root
        self.bin = root / "bin"
        self.ws = root / "ws"
        self.log = root / "log.txt"
        self.bin.mkdir(parents=True)
        self.ws.mkdir()
        for name in SHIMMED:
            shim = self.bin / name
            shim.write_text(SHIM.format(name=name, log=shlex.quote(str(self.log))), encoding="utf-8")
            shim.chmod(0o755)
        agent = root / "agent.yaml"
        agent.write_text(
            textwrap.dedent(
                f"""\
                version: 1
                name: oracle
                model: openai/scripted
                tools:
                  - builtin: shell
                    with:
                      cwd: ws
                      timeout_s: 10
                      inherit_env: false
                      env: {{PATH: "{self.bin}:/usr/bin:/bin"}}
                """
            )
            + permissions,
            encoding="utf-8",
        )
        self.config = load_agent(agent, env={})
        self.yes = yes
        self.loop = asyncio.Runner()
        self.runtime: AgentRuntime = self.loop.run(
            open_runtime(
                self.config,
                RuntimeSettings(home=root / ".runner", write_transcript=False),
                model=ScriptedModel([]),
            )
        )

    def run(self, line: str) -> Outcome:
        for path in self.ws.iterdir():
            path.unlink() if path.is_file() else None
        (self.ws / "V").write_text("victim", encoding="utf-8")
        self.log.write_text("", encoding="utf-8")
        decided = verdict(self.runtime.permissions, "shell", {"command": line})
        result = self.loop.run(self._session(line))
        ran = [tuple(entry.split("\t", 2)) for entry in self.log.read_text(encoding="utf-8").splitlines()]
        return Outcome(
            line=line,
            verdict=decided,
            result=result,
            ran=[(r[0], r[1], r[2] if len(r) > 2 else "") for r in ran],
            victim_alive=(self.ws / "V").exists(),
            markers=[name for name in MARKERS if (self.ws / name).exists()],
        )

    async def _session(self, line: str) -> str:
        model = ScriptedModel([tool_call("shell", command=line), text("done")])
        session = Session(
            self.runtime, model=model, options=RunOptions(assume_yes=self.yes, transcript=False)
        )
        try:
            await session.run(["go"])
        finally:
            await session.close()
        (result,) = [m["content"] for m in session.history if m.get("role") == "tool"]
        return str(result)

    def close(self) -> None:
        self.loop.run(self.runtime.aclose())
        self.loop.close()


def _held_allow(outcome: Outcome) -> None:
    """ALLOW: only git and ls ran, without assignments, and only when the rules said allow."""
    why = f"{outcome.line!r} (verdict {outcome.verdict}) -> {outcome.result!r}"
    for name, variables, args in outcome.ran:
        assert name in ("git", "ls") and not variables, f"{name} {args} [{variables}] ran: {why}"
    if outcome.ran:
        assert outcome.verdict == "allow", why
    assert outcome.victim_alive and not outcome.markers, why


def _held_deny(outcome: Outcome) -> None:
    """DENY: rm, touch and evil never ran, nor /bin/rm or /usr/bin/touch."""
    why = f"{outcome.line!r} (verdict {outcome.verdict}) -> {outcome.result!r}"
    forbidden = [entry for entry in outcome.ran if entry[0] in ("rm", "touch", "evil")]
    assert not forbidden, f"{forbidden} ran: {why}"
    assert outcome.victim_alive and not outcome.markers, why


@pytest.fixture(scope="module")
def allow_oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oracle]:
    rules = 'permissions:\n  allow: ["shell(command=git *)", "shell(command=ls *)"]\n'
    oracle = Oracle(tmp_path_factory.mktemp("allow"), rules, yes=False)
    yield oracle
    oracle.close()


@pytest.fixture(scope="module")
def deny_oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oracle]:
    rules = (
        'permissions:\n  deny: ["shell(command=rm *)", "shell(command=touch *)", "shell(command=evil *)"]\n'
    )
    oracle = Oracle(tmp_path_factory.mktemp("deny"), rules, yes=True)
    yield oracle
    oracle.close()


@pytest.fixture(scope="module")
def open_oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oracle]:
    """No rules and ``--yes``: the control that shows each attack really runs."""
    oracle = Oracle(tmp_path_factory.mktemp("open"), "", yes=True)
    yield oracle
    oracle.close()


def _attacked(outcome: Outcome) -> bool:
    forbidden = [entry for entry in outcome.ran if entry[0] in ("rm", "touch", "evil") or entry[1]]
    return bool(forbidden) or not outcome.victim_alive or bool(outcome.markers)


@pytest.mark.parametrize("line", ISSUE_ATTACKS + HAND_WRITTEN + WRAPPED)
def test_the_attacks_are_real_without_rules(open_oracle: Oracle, line: str) -> None:
    outcome = open_oracle.run(line + "\nwait")
    assert _attacked(outcome), f"the oracle must see this attack when nothing stops it: {outcome.result}"


@pytest.mark.parametrize("line", ISSUE_ATTACKS + HAND_WRITTEN + WRAPPED + JUDGED_ONLY)
def test_an_allow_rule_never_lets_anything_else_run(allow_oracle: Oracle, line: str) -> None:
    _held_allow(allow_oracle.run(line))


@pytest.mark.parametrize("line", ISSUE_ATTACKS + HAND_WRITTEN + WRAPPED + JUDGED_ONLY)
def test_a_deny_rule_holds_against_the_real_shell(deny_oracle: Oracle, line: str) -> None:
    _held_deny(deny_oracle.run(line + "\nwait"))


@pytest.mark.parametrize(("line", "programs"), ALLOWED)
def test_lines_the_allow_rules_vouch_for_run(allow_oracle: Oracle, line: str, programs: list[str]) -> None:
    outcome = allow_oracle.run(line)
    assert outcome.verdict == "allow", outcome.result
    assert sorted(name for name, _, _ in outcome.ran) == sorted(programs)
    _held_allow(outcome)


# -- generated lines -------------------------------------------------------------------------------

_COMMANDS = [
    "git status", "git diff", "ls -a", "rm -f V", "touch M", "evil x", "true", "false", ":",
    "/bin/rm -f V", "/usr/bin/touch M", "../bin/rm -f V", "../bin/git status", '"rm" -f V', "r''m -f V",
    "\\rm -f V", "'touch' M", 'r""m -f V', "env rm -f V", "command rm -f V", "nohup touch M",
    "xargs rm -f V", "time evil x", "timeout 5 rm -f V", "env ZZ_A=1 git status", "echo rm -f V",
    "git log --format='rm -f V'", "git commit -m 'x; rm -f V'", "$R -f V", "${R:-rm} -f V",
    "ls a#b", "git log \\#x",
]  # fmt: skip
#: Mostly allowed commands: lines near the edge of what the allow rules vouch for.
_ALLOWED_COMMANDS = [
    "git status", "git diff", "ls -a", "git log", "ls -l", '"git" status', "g''it diff", "git add $f",
    "ls *", "git log ~", "true", ":", "../bin/git status", "env git status", "rm -f V", "touch M",
]  # fmt: skip
_PREFIXES = ["", "", "", "ZZ_A=1 ", "ZZ_B='touch M' ", "R=rm "]
_SUFFIXES = ["", "", "", " > /dev/null", " 2>&1", " > out", " < /dev/null", " # note", " #'"]
_SEPARATORS = ["; ", " && ", " || ", " | ", " & ", "\n", " ;\n"]


def _simple(commands: list[str]) -> st.SearchStrategy[str]:
    rare = commands is _ALLOWED_COMMANDS  # near the edge: most commands plain
    return st.builds(
        lambda prefix, command, suffix: prefix + command + suffix,
        st.sampled_from([""] * 6 + _PREFIXES if rare else _PREFIXES),
        st.sampled_from(commands),
        st.sampled_from([""] * 6 + _SUFFIXES if rare else _SUFFIXES),
    )


def _compound(children: st.SearchStrategy[str], simple: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    two = st.tuples(children, children)
    plain = simple.filter(lambda a: "`" not in a and "\\" not in a and "#" not in a)
    return st.one_of(
        st.builds(lambda a, sep, b: a + sep + b, children, st.sampled_from(_SEPARATORS), children),
        children.map(lambda a: "{ " + a + "\n}"),
        children.map(lambda a: "( " + a + " )"),
        children.map(lambda a: "! " + a),
        two.map(lambda ab: f"if {ab[0]}\nthen {ab[1]}\nfi"),
        st.tuples(children, children, children).map(lambda t: f"if {t[0]}\nthen {t[1]}\nelse {t[2]}\nfi"),
        children.map(lambda a: f"for f in a b; do {a}\ndone"),
        two.map(lambda ab: f"while {ab[0]}\ndo {ab[1]}\nbreak; done"),
        two.map(lambda ab: f"until {ab[0]}\ndo {ab[1]}\nbreak; done"),
        children.map(lambda a: f"git log $({a}\n)"),
        children.map(lambda a: f'ls "$({a}\n)"'),
        plain.map(lambda a: f"ls `{a}`"),
        children.map(lambda a: "sh -c " + shlex.quote(a)),
        children.map(lambda a: "eval " + shlex.quote(a)),
        two.map(lambda ab: f"{ab[0]} #'\n{ab[1]}\n#'"),
        children.map(lambda a: f"cat <<E\n$({a}\n)\nE"),
        children.map(lambda a: f"case x in x) {a};; esac"),
        children.map(lambda a: f"g() {{ {a}\n}}; g"),
    )


def _lines(commands: list[str]) -> st.SearchStrategy[str]:
    simple = _simple(commands)
    return st.recursive(simple, lambda children: _compound(children, simple), max_leaves=5)


GENERATED = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@settings(GENERATED, max_examples=150)
@given(_lines(_ALLOWED_COMMANDS))
@example("git status #'\nrm -f V\n#'")
def test_generated_lines_under_an_allow_rule(allow_oracle: Oracle, line: str) -> None:
    outcome = allow_oracle.run(line)
    event(f"verdict {outcome.verdict}, ran {len(outcome.ran)}")
    _held_allow(outcome)


@GENERATED
@given(_lines(_COMMANDS))
@example("if true; then rm -f V; fi")
def test_generated_lines_under_a_deny_rule(deny_oracle: Oracle, line: str) -> None:
    outcome = deny_oracle.run(line + "\nwait")
    event(f"verdict {outcome.verdict}, ran {len(outcome.ran)}")
    _held_deny(outcome)


# -- real git: the assignments that turn `git` into any program ------------------------------------


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)}
    for args in (
        ["init", "-q"],
        ["add", "f"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
    ):
        if args[0] == "add":
            (ws / "f").write_text("one\n", encoding="utf-8")
        subprocess.run(["git", *args], cwd=ws, env=env, check=True, capture_output=True)
    (ws / "f").write_text("two\n", encoding="utf-8")
    return tmp_path


GIT_ATTACKS = [
    "GIT_EXTERNAL_DIFF='touch X' git diff",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.st GIT_CONFIG_VALUE_0='!touch X' git st",
]


async def _run_git(tmp_path: Path, permissions: str, line: str) -> str:
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        "version: 1\nname: git\nmodel: openai/scripted\ntools:\n  - builtin: shell\n"
        f"    with: {{cwd: ws, inherit_env: false, env: {{HOME: '{tmp_path}', GIT_CONFIG_NOSYSTEM: '1'}}}}\n"
        + permissions,
        encoding="utf-8",
    )
    settings = RuntimeSettings(home=tmp_path / ".runner", write_transcript=False)
    runtime = await open_runtime(load_agent(agent, env={}), settings, model=ScriptedModel([]))
    try:
        model = ScriptedModel([tool_call("shell", command=line), text("done")])
        session = Session(runtime, model=model, options=RunOptions(transcript=False))
        try:
            await session.run(["go"])
        finally:
            await session.close()
    finally:
        await runtime.aclose()
    return str(next(m["content"] for m in session.history if m.get("role") == "tool"))


@pytest.mark.parametrize("line", GIT_ATTACKS)
async def test_assignments_before_git_are_not_allowed_by_git_star(git_repo: Path, line: str) -> None:
    result = await _run_git(git_repo, 'permissions:\n  allow: ["shell(command=git *)"]\n', line)
    assert result.startswith("Refused"), result
    assert not (git_repo / "ws" / "X").exists()


@pytest.mark.parametrize("line", GIT_ATTACKS)
async def test_a_pattern_that_names_the_assignments_allows_them(git_repo: Path, line: str) -> None:
    """The control: the attack is real, and a pattern that names the assignments lets it run."""
    pattern = "shell(command=GIT_* git *)"
    await _run_git(git_repo, f'permissions:\n  allow: ["{pattern}"]\n', line)
    assert (git_repo / "ws" / "X").exists()


# -- end to end: `runner run --yes` ----------------------------------------------------------------


@pytest.mark.slow
def test_runner_run_with_yes_refuses_every_attack(tmp_path: Path) -> None:
    oracle_root = tmp_path / "o"
    ws = oracle_root / "ws"
    bin_dir = oracle_root / "bin"
    bin_dir.mkdir(parents=True)
    ws.mkdir()
    log = oracle_root / "log.txt"
    for name in SHIMMED:
        (bin_dir / name).write_text(SHIM.format(name=name, log=shlex.quote(str(log))), encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    (ws / "V").write_text("victim", encoding="utf-8")
    attacks = [line for line in ISSUE_ATTACKS if not line.startswith("ZZ_")] + ["sh -c 'rm -f V'"]
    script = [
        {"tool_calls": [{"name": "shell", "arguments": {"command": line}} for line in attacks]},
        {"content": "finished"},
    ]
    with ScriptedServer(script) as server:
        agent = oracle_root / "agent.yaml"
        agent.write_text(
            "version: 1\nname: e2e\nmodel:\n  id: openai/scripted\n"
            f"  api_base: {server.base_url}\n  api_key: ${{TEST_API_KEY:-sk-none}}\n"
            "tools:\n  - builtin: shell\n"
            f"    with: {{cwd: ws, inherit_env: false, env: {{PATH: '{bin_dir}:/usr/bin:/bin'}}}}\n"
            'permissions:\n  deny: ["shell(command=rm *)", "shell(command=touch *)"]\n',
            encoding="utf-8",
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT), "RUNNER_HOME": str(tmp_path / "home")}
        done = subprocess.run(
            [sys.executable, "-m", "runner", "run", str(agent), "-p", "clean up", "--yes"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "finished"
        results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert len(results) == len(attacks)
    assert all(result.startswith("Denied by the permissions rule") for result in results), results
    assert not log.exists() or log.read_text(encoding="utf-8") == ""
    assert (ws / "V").exists() and not (ws / "PWNED").exists()
