"""The ``runner`` command's entry point (the console script and ``python -m runner``).

It imports the typer root (``app.py``) and every module that registers commands on it; nothing
imports this module back. Module map: ``app`` (the root and the shared options), ``common`` (error
printing, paths, ``--var`` and ``--rev``), the registration modules ``agent_cli`` (init, validate,
schema, render, tools), ``run_cli`` (run, resume, sessions, test), ``eval_cli``, ``batch_cli``,
``serve_cli``, ``audit_cli``, ``diff_cli``; the bodies they import when a command runs
(``commands``, ``run``, ``testcmd``, ``serve_cmd``, ...). Heavy modules are imported inside the
commands that need them, so ``runner --help`` and ``runner validate`` start fast (SPEC section 14).
"""

from __future__ import annotations

import os
import sys

from runner.cli import (
    acp_cli,
    agent_cli,
    audit_cli,
    batch_cli,
    diff_cli,
    eval_cli,
    mcp_cli,
    report_cli,
    run_cli,
    serve_cli,
)
from runner.cli.app import app
from runner.cli.common import _state
from runner.cli.helpfmt import debug_anywhere

__all__ = ["app", "main"]

#: The registration modules: importing them added their commands to ``app``.
COMMAND_MODULES = (
    agent_cli,
    run_cli,
    eval_cli,
    batch_cli,
    serve_cli,
    mcp_cli,
    audit_cli,
    diff_cli,
    acp_cli,
    report_cli,
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
