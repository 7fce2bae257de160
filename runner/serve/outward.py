"""Text the server sends out of its own accord, with secrets masked (issue 23).

What the runner itself says to a client — a model's description in ``/v1/models``, error messages,
and the cards and tool descriptions of the protocol doors to come — goes through ``outward`` (or a
``Redactor`` from ``outward_redactor``) before it leaves the process: the secrets given (an agent's
``config.secrets``: ``${VAR}`` values named like secrets, a literal ``api_key``) and the credentials
of the process environment (``environment_secrets``, the rule ``cli/guard.py`` applies to stdout
and stderr) become ``***``. An answer the model writes is not passed through it (docs/security.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from runner.agentfile.interpolate import environment_secrets
from runner.store.transcript import Redactor

__all__ = ["outward", "outward_redactor"]


def outward_redactor(secrets: Iterable[str] = (), *, environ: Mapping[str, str] | None = None) -> Redactor:
    """A redactor of ``secrets`` and of the environment's credentials (``os.environ`` by default)."""
    known = set(secrets) | environment_secrets(os.environ if environ is None else environ)
    return Redactor(known)


def outward(text: str, secrets: Iterable[str] = (), *, environ: Mapping[str, str] | None = None) -> str:
    """``text`` as it may leave the process: ``secrets`` and the environment's credentials masked."""
    return outward_redactor(secrets, environ=environ)(text)
