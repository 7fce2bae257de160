"""`runner sessions list` shows the newest sessions (a limit, and how many more there are), an
ambiguous id prefix lists its candidates one per line, and `runner resume` of a finished session
says so and how to go on (issue 23 item 18)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.store.transcript import TranscriptWriter
from tests.cli_run.conftest import Cli, write_agent


def _sessions(home: Path, count: int, *, agent: str = "alpha", day: str = "20261201") -> list[str]:
    """``count`` finished one-turn transcripts, oldest first; their ids."""
    ids = []
    for n in range(count):
        session_id = f"{day}-{n // 60:02d}{n % 60:02d}00-{n:012x}"
        writer = TranscriptWriter(home / "sessions" / f"{session_id}.jsonl")
        writer.header(
            session_id=session_id,
            agent=agent,
            agent_path="/nowhere/agent.yaml",
            agent_sha256="0" * 64,
            model="openai/m",
        )
        writer.event("turn", turn=1)
        writer.message({"role": "user", "content": f"question {n}"})
        writer.message({"role": "assistant", "content": "answer"})
        writer.close()
        ids.append(session_id)
    return ids


def test_list_shows_the_20_newest_and_how_many_more(cli: Cli) -> None:
    ids = _sessions(cli.home, 25)
    result = cli("sessions", "list")
    assert result.returncode == 0, result.stderr
    shown = [line.split()[0] for line in result.stdout.splitlines()]
    assert shown == ids[::-1][:20]  # newest first
    assert "... and 5 older sessions (--limit N shows N, --all every one)" in result.stderr


def test_list_limit_and_all(cli: Cli) -> None:
    ids = _sessions(cli.home, 25)
    three = cli("sessions", "list", "--limit", "3")
    assert [line.split()[0] for line in three.stdout.splitlines()] == ids[::-1][:3]
    assert "... and 22 older sessions" in three.stderr
    every = cli("sessions", "list", "--all")
    assert len(every.stdout.splitlines()) == 25 and "older" not in every.stderr
    refused = cli("sessions", "list", "--limit", "0")
    assert refused.returncode == 2 and "--limit" in refused.stderr


def test_a_filtered_list_counts_only_the_matching_sessions(cli: Cli) -> None:
    _sessions(cli.home, 4, agent="beta", day="20261130")
    alphas = _sessions(cli.home, 23)
    result = cli("sessions", "list", "--agent", "alpha", "--limit", "20")
    assert [line.split()[0] for line in result.stdout.splitlines()] == alphas[::-1][:20]
    assert "... and 3 older sessions" in result.stderr
    betas = cli("sessions", "list", "--agent", "beta")
    assert len(betas.stdout.splitlines()) == 4 and "older" not in betas.stderr


def test_an_ambiguous_prefix_lists_the_newest_candidates_one_per_line(cli: Cli) -> None:
    ids = _sessions(cli.home, 12)
    result = cli("sessions", "show", "20261201")
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0] == "error: session id '20261201' is ambiguous: 12 sessions begin with it; the 5 newest:"
    assert lines[1:6] == [f"  {i}" for i in ids[::-1][:5]]
    assert lines[6:] == ["  ... and 7 more", "give more of the id (runner sessions list shows them)"]
    few = cli("resume", ids[0][:-1])  # a prefix of one id only: found
    assert "ambiguous" not in few.stderr


def test_an_ambiguous_prefix_of_a_few_lists_them_all(cli: Cli) -> None:
    ids = _sessions(cli.home, 2)
    result = cli("resume", "2026")
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0] == "error: session id '2026' is ambiguous: 2 sessions begin with it:"
    assert lines[1:] == [
        *(f"  {i}" for i in ids[::-1]),
        "give more of the id (runner sessions list shows them)",
    ]


def test_resume_of_a_finished_session_says_it_is_complete_and_how_to_go_on(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    server = serve([{"content": "hello"}])
    agent = write_agent(
        tmp_path / "a",
        f"version: 1\nname: t\nmodel:\n  id: openai/scripted\n  api_base: {server.base_url}\n  retries: 0\n",
    )
    assert cli("run", str(agent), "-p", "hi").returncode == 0
    (path,) = cli.transcripts()
    resumed = cli("resume", path.stem)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stderr.splitlines() == [
        f"session {path.stem} is complete: its last turn ended (done), and nothing waits for the model",
        f"to go on: runner resume {path.stem} -p TEXT, or -i to chat",
    ]
    assert resumed.stdout == ""
    assert len(server.requests) == 1  # nothing was sent
