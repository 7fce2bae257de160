"""The ``runner`` command: the only layer that prints and chooses exit codes.

Module map: ``main`` (the typer app; command bodies import what they need lazily), ``commands``
(validate, render, tools, sessions, run/resume set-up), ``run`` (the session on its own thread),
``interactive`` (the REPL), ``output`` (console and ``--json`` rendering of events), ``testcmd``
(``runner test``), ``serve_cmd`` (``runner serve``), ``scaffold`` (``runner init``).
"""
