"""`runner run` option combinations that make no sense are refused with a clear message."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from runner.cli.main import app


def test_replay_loose_without_replay_is_an_error(tmp_path: Path) -> None:
    agent = tmp_path / "a.yaml"
    agent.write_text("version: 1\nname: a\nmodel: openai/gpt-4o-mini\n")
    result = CliRunner().invoke(app, ["run", str(agent), "-p", "hi", "--replay-loose"])
    assert result.exit_code == 2
    assert "--replay-loose only changes --replay" in result.output


def test_help_writes_arguments_plainly_with_an_example() -> None:
    import subprocess
    import sys
    from pathlib import Path as _Path

    runner = str(_Path(sys.executable).parent / "runner")
    for command in ("run", "validate", "render", "tools", "test", "serve", "resume", "sessions", "init"):
        out = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "100"})  # in process: cheap
        assert out.exit_code == 0, out.output
        assert "<str>" not in out.stdout and "{" not in out.stdout.splitlines()[1], out.stdout[:300]
        assert "Example: runner " in out.stdout, command
    # and once through the installed command
    usage = subprocess.run([runner, "run", "--help"], capture_output=True, text=True).stdout
    assert "Usage: runner run [OPTIONS] AGENT" in usage


def test_debug_is_accepted_after_the_subcommand(tmp_path: Path) -> None:
    import subprocess
    import sys
    from pathlib import Path as _Path

    runner = str(_Path(sys.executable).parent / "runner")
    missing = str(tmp_path / "missing.yaml")
    plain = subprocess.run([runner, "run", missing, "-p", "x"], capture_output=True, text=True)
    debug = subprocess.run([runner, "run", missing, "-p", "x", "--debug"], capture_output=True, text=True)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    assert "No such option" not in debug.stderr and "Traceback" in debug.stderr
    prompt = subprocess.run(
        [runner, "render", missing, "-p", "--debug"], capture_output=True, text=True
    )  # here --debug is the prompt's text, not the flag
    assert "Traceback" not in prompt.stderr
