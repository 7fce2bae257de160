"""The ``runner`` command: the only layer that prints and chooses exit codes.

Module map: ``main`` (the entry point: imports the root and every registration module), ``app`` (the
typer root and the shared options), ``common`` (what every command uses: error printing, paths,
``--var``, ``--rev``), the registration modules ``*_cli`` (each command's options; ``agent_cli``:
init, validate, schema, render, tools; ``run_cli``: run, resume, sessions, test), and the bodies
they import when a command runs: ``commands`` (validate, render, tools, run/resume set-up), ``run``
(the session on its own thread), ``interactive`` (the REPL), ``output`` (console and ``--json``
rendering of events), ``testcmd`` (``runner test``), ``serve_cmd`` (``runner serve``), ``scaffold``
(``runner init``).
"""
