"""The ``runner`` command (typer). The only layer that prints and chooses exit codes.

Heavy modules are imported inside the commands that need them, so ``runner --help`` and
``runner validate`` start fast (SPEC section 14).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from runner import __version__
from runner.cli.helpfmt import CommandsInOrder, PlainText, debug_anywhere, plain_argument_help
from runner.errors import ConfigError, ConfigErrors, RunnerError

__all__ = [
    "RevOption",
    "VarOption",
    "app",
    "at_rev",
    "debug_enabled",
    "display_path",
    "echo_error",
    "handles_errors",
    "init",
    "main",
    "parse_vars",
    "render",
    "resume",
    "run",
    "schema",
    "sessions",
    "test_command",
    "tools",
    "validate",
]

F = TypeVar("F", bound=Callable[..., Any])

plain_argument_help()
#: The type of the text arguments: help shows ``AGENT``, not ``AGENT <str>``.
TEXT_ARG = PlainText()

app = typer.Typer(
    name="runner",
    cls=CommandsInOrder,
    help="A declarative agent runner: an agent is a YAML file; one generic loop runs it.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_state = {"debug": os.environ.get("RUNNER_DEBUG", "").lower() in ("1", "true", "yes")}


def debug_enabled() -> bool:
    """Whether tracebacks should be shown (``--debug`` or ``RUNNER_DEBUG=1``)."""
    return _state["debug"]


def echo_error(error: RunnerError) -> None:
    """Print one error (each of several) to stderr, in FILE:LINE:COL: PATH: message form."""
    errors = list(error) if isinstance(error, ConfigErrors) else [error]
    for e in errors:
        text = str(e)
        if isinstance(e, ConfigError) and e.file:
            text = text.replace(e.file, display_path(e.file), 1)
        typer.echo(f"error: {text}" if not (isinstance(e, ConfigError) and e.file) else text, err=True)


def display_path(file: str) -> str:
    """A path relative to the current directory when it is inside it; ``path@REV`` at a revision."""
    from runner.agentfile.revisions import revision_of

    revision = revision_of(Path(file))
    if revision is not None:
        return f"{revision.path}@{revision.rev}"
    try:
        return str(Path(file).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return file


def handles_errors(fn: F) -> F:
    """Turn ``RunnerError`` into one clean message and its exit code; others into exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except BrokenPipeError:  # the reader went away (`runner render ... | head`): stop quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(0) from None
        except RunnerError as exc:
            if debug_enabled():
                raise
            echo_error(exc)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None
        except Exception as exc:
            if debug_enabled():
                raise
            typer.echo(f"internal error: {type(exc).__name__}: {exc}", err=True)
            typer.echo("run again with --debug (or RUNNER_DEBUG=1) to see the traceback", err=True)
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"runner {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show Python tracebacks for errors.")] = False,
) -> None:
    """A declarative agent runner: an agent is a YAML file; one generic loop runs it."""
    if debug:
        _state["debug"] = True


def parse_vars(items: list[str] | None) -> dict[str, Any]:
    """``--var K=V`` options as a mapping; values read as YAML scalars (numbers, booleans)."""
    from runner.agentfile.interpolate import retype

    result: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ConfigError(f"--var expects NAME=VALUE, got '{item}'")
        result[key.strip()] = retype(value)
    return result


RevOption = Annotated[
    str | None,
    typer.Option(
        "--rev",
        metavar="REV",
        help="The agent as it was at this git revision (read from git; work tree untouched).",
    ),
]


def at_rev(ref: str, rev: str | None) -> str:
    """AGENT at ``--rev REV`` (or a ``git+URL#REV:path`` reference): its file in the revision's tree."""
    if rev is None and not ref.startswith("git+"):
        return ref
    from runner.agentfile.files import agent_at

    return str(agent_at(ref, rev=rev))


VarOption = Annotated[
    list[str] | None,
    typer.Option("--var", metavar="NAME=VALUE", help="Set a template variable: NAME=VALUE (repeatable)."),
]


@app.command()
@handles_errors
def validate(
    agents: Annotated[
        list[str],
        typer.Argument(click_type=TEXT_ARG, metavar="AGENT...", help="Agent files (or names) to check."),
    ],
    json_output: Annotated[bool, typer.Option("--json", help="Print the errors as JSON.")] = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show which file of an extends chain set each value.")
    ] = False,
    var: VarOption = None,
    rev: RevOption = None,
) -> None:
    """Check agent files against the schema and what the schema cannot see. Exit 2 if any is invalid.

    Example: runner validate agent.yaml; runner validate agents/ --json
    """
    from runner.cli.commands import run_validate

    code = run_validate(
        [at_rev(a, rev) for a in agents], json_output=json_output, explain=explain, variables=parse_vars(var)
    )
    raise typer.Exit(code)


@app.command()
@handles_errors
def schema(
    name: Annotated[
        str,
        typer.Argument(
            click_type=TEXT_ARG, metavar="NAME", help="Which schema: agent, transcript or cassette."
        ),
    ] = "agent",
) -> None:
    """Print a JSON Schema (the agent file's by default).

    Example: runner schema > agent.schema.json; runner schema transcript
    """
    from runner.resources import data_dir, schema_path, schema_text

    if "/" in name or not schema_path(name).is_file():
        names = sorted(p.name.removesuffix(".schema.json") for p in data_dir("schemas").glob("*.schema.json"))
        raise ConfigError(f"no schema named '{name}'", hint="the schemas are: " + ", ".join(names))
    sys.stdout.write(schema_text(name))


@app.command()
@handles_errors
def render(
    agent: Annotated[str, typer.Argument(click_type=TEXT_ARG, metavar="AGENT", help="Agent file or name.")],
    input: Annotated[
        str, typer.Option("--input", "-p", metavar="TEXT", help="The sample user input to render.")
    ] = "Hello!",
    var: VarOption = None,
    agent_name: Annotated[
        str | None, typer.Option("--agent", metavar="NAME", help="Which agent of a team file.")
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the request as JSON.")] = False,
    rev: RevOption = None,
) -> None:
    """Show the first request (system prompt, tools, user message) without calling a model.

    Example: runner render agent.yaml -p "What is the weather?" --var units=imperial
    """
    from runner.cli.commands import run_render

    run_render(
        at_rev(agent, rev),
        input=input,
        variables=parse_vars(var),
        agent_name=agent_name,
        json_output=json_output,
    )


@app.command()
@handles_errors
def init(
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="Where to create the agent.")] = Path("."),
    name: Annotated[str | None, typer.Option("--name", metavar="NAME", help="The agent's name.")] = None,
) -> None:
    """Scaffold an agent, a tool module and a test that validate and pass.

    Example: runner init my-agent
    """
    import shlex

    from runner.cli.scaffold import scaffold

    created = scaffold(directory, name=name)
    for path in created:
        typer.echo(f"created {shlex.quote(display_path(str(path)))}")
    agent_file = shlex.quote(display_path(str(created[0])))  # a command line to copy: quoted
    typer.echo(f"next: runner validate {agent_file} && runner render {agent_file}")
    typer.echo(f"then, with a model key: runner test {agent_file} --update   (records the test's cassette;")
    typer.echo(f"      afterwards `runner test {agent_file}` replays it offline, e.g. in CI)")


@app.command()
@handles_errors
def run(
    agent: Annotated[str, typer.Argument(click_type=TEXT_ARG, metavar="AGENT", help="Agent file or name.")],
    prompt: Annotated[
        list[str] | None,
        typer.Option("--prompt", "-p", metavar="TEXT", help="A prompt to run (repeatable, in order)."),
    ] = None,
    interactive: Annotated[bool, typer.Option("--interactive", "-i", help="Chat after the prompts.")] = False,
    var: VarOption = None,
    model: Annotated[
        str | None, typer.Option("--model", metavar="MODEL", help="Use this model instead of the file's.")
    ] = None,
    agent_name: Annotated[
        str | None, typer.Option("--agent", metavar="NAME", help="Which agent of a team file.")
    ] = None,
    session: Annotated[
        str | None,
        typer.Option("--session", metavar="ID", help="Continue a saved session (same as runner resume)."),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Allow tools that ask for confirmation.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON event per line on stdout.")] = False,
    no_stream: Annotated[bool, typer.Option("--no-stream", help="Ask the model for whole replies.")] = False,
    no_thinking: Annotated[bool, typer.Option("--no-thinking", help="Hide the model's reasoning.")] = False,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch", help="Reload the agent's files when they change (a workflow's: between steps)."
        ),
    ] = False,
    record: Annotated[
        Path | None,
        typer.Option("--record", metavar="FILE", help="Record every model call to this cassette."),
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option("--replay", metavar="FILE", help="Answer model calls from this cassette (no network)."),
    ] = None,
    replay_loose: Annotated[
        bool,
        typer.Option("--replay-loose", help="With --replay: warn on a changed request instead of failing."),
    ] = False,
    rev: RevOption = None,
) -> None:
    """Run an agent on prompts (-p), interactively (-i), or both.

    Example: runner run agent.yaml -p "Hello"; runner run agent.yaml -i --watch
    """
    if record is not None and replay is not None:
        raise ConfigError("--record and --replay cannot be used together")
    if replay_loose and replay is None:
        raise ConfigError("--replay-loose only changes --replay: give --replay FILE too")
    from runner.cli.commands import run_agent

    code = run_agent(
        at_rev(agent, rev),
        prompts=prompt or [],
        interactive=interactive,
        variables=parse_vars(var),
        model=model,
        agent_name=agent_name,
        session_id=session,
        yes=yes,
        json_output=json_output,
        stream=False if no_stream else None,
        thinking=not no_thinking,
        record=record,
        replay=replay,
        replay_strict=not replay_loose,
        watch=watch,
    )
    raise typer.Exit(code)


@app.command()
@handles_errors
def resume(
    session_id: Annotated[
        str,
        typer.Argument(click_type=TEXT_ARG, metavar="ID", help="The session id (a unique prefix is enough)."),
    ],
    prompt: Annotated[
        list[str] | None, typer.Option("--prompt", "-p", metavar="TEXT", help="Prompts to add.")
    ] = None,
    interactive: Annotated[bool, typer.Option("--interactive", "-i", help="Chat afterwards.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Allow tools that ask for confirmation.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON event per line on stdout.")] = False,
) -> None:
    """Continue a saved session; if it stopped mid-turn, the next step starts at once.

    Example: runner resume 20261201-1305 -p "and then?"
    """
    from runner.cli.commands import run_agent

    code = run_agent(
        None,
        prompts=prompt or [],
        interactive=interactive,
        variables={},
        model=None,
        agent_name=None,
        session_id=session_id,
        yes=yes,
        json_output=json_output,
        stream=None,
        thinking=True,
    )
    raise typer.Exit(code)


@app.command()
@handles_errors
def tools(
    agent: Annotated[str, typer.Argument(click_type=TEXT_ARG, metavar="AGENT", help="Agent file or name.")],
    json_output: Annotated[
        bool, typer.Option("--json", help="The exact tool specs sent to the model.")
    ] = False,
    agent_name: Annotated[
        str | None, typer.Option("--agent", metavar="NAME", help="Which agent of a team file.")
    ] = None,
    check: Annotated[
        bool,
        typer.Option("--check", help="Open each source alone and report it: ok (tools, time) or why not."),
    ] = False,
    rev: RevOption = None,
) -> None:
    """The resolved tool table: name, source, description; renames and failed sources.

    Example: runner tools agent.yaml; runner tools agent.yaml --check
    """
    from runner.cli.commands import run_tools

    raise typer.Exit(
        run_tools(at_rev(agent, rev), json_output=json_output, agent_name=agent_name, check=check)
    )


@app.command()
@handles_errors
def sessions(
    action: Annotated[
        str, typer.Argument(click_type=TEXT_ARG, metavar="list|show", help="list, or show")
    ] = "list",
    session_id: Annotated[
        str | None, typer.Argument(click_type=TEXT_ARG, metavar="ID", help="The session to show.")
    ] = None,
    show_all: Annotated[
        bool,
        typer.Option(
            "--all", help="list: every session (no limit); show: every transcript event, bookkeeping too."
        ),
    ] = False,
    limit: Annotated[
        int,
        typer.Option("--limit", metavar="N", min=1, help="list: the N newest sessions (default 20)."),
    ] = 20,
    agent: Annotated[
        str | None, typer.Option("--agent", metavar="NAME", help="list: only the sessions of this agent.")
    ] = None,
    rev: Annotated[
        str | None,
        typer.Option(
            "--rev", metavar="REV", help="list: only sessions whose agent file was at this revision."
        ),
    ] = None,
) -> None:
    """List saved sessions (the newest first, with how each ended), or show one.

    Sessions are kept under RUNNER_HOME (default ./.runner), in sessions/ID.jsonl. show prints
    which configuration each turn ran under, and what a reload changed.

    Example: runner sessions list --agent weather --rev HEAD~1; runner sessions show 20261201-1305
    """
    from runner.cli.sessions_cmd import run_sessions

    run_sessions(
        action, session_id, show_all=show_all, agent=agent, rev=rev, limit=None if show_all else limit
    )


@app.command("test")
@handles_errors
def test_command(
    agents: Annotated[
        list[str],
        typer.Argument(
            click_type=TEXT_ARG, metavar="AGENT...", help="Agent files (or names) whose tests: to run."
        ),
    ],
    update: Annotated[
        bool, typer.Option("--update", help="Record the cassettes again against the live model.")
    ] = False,
    rev: RevOption = None,
) -> None:
    """Run each agent's tests: against their cassettes; exit 1 if any case fails.

    Example: runner test agent.yaml; runner test agent.yaml --update (records again, live)
    """
    from runner.cli.commands import runtime_settings
    from runner.cli.testcmd import run_tests

    raise typer.Exit(
        run_tests([at_rev(a, rev) for a in agents], update=update, settings=runtime_settings(None))
    )


def main() -> None:
    """Console-script entry point.

    A sync tool that timed out or was interrupted keeps its worker thread until it returns (Python
    threads cannot be killed), and the interpreter would wait for it at exit. Only when such a call is
    still running does the process exit at once, after running the ``atexit`` handlers (tool modules
    register some) and flushing; otherwise it exits normally.
    """
    import atexit

    from runner.cli import guard

    guard.install()
    if debug_anywhere(sys.argv):
        _state["debug"] = True
    try:
        app()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    guard.drain()
    # only a command that ran tools or models imported the worker threads (``--help`` does not)
    threads = sys.modules.get("runner.tools.threads")
    if threads is not None and (threads.TOOL_THREADS.running or threads.MODEL_THREADS.running):
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


# Commands defined in their own modules register themselves on `app` when imported.
from runner.cli import serve_cli, batch_cli, audit_cli, diff_cli, eval_cli  # noqa: E402, F401, I001
