"""A team file's workflow, loaded with every check ``runner validate`` makes."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from runner.agentfile.workflow import WorkflowConfig
from runner.errors import ConfigErrors

__all__ = ["team_workflow"]


def team_workflow(path: Path, *, extra_vars: Iterable[str] = ()) -> WorkflowConfig | None:
    """The workflow of the team file at ``path`` (None: not a team file, or one without a workflow),
    with every check ``runner validate`` makes: a workflow whose references ``validate`` refuses
    never starts (``ConfigErrors``, exit 2)."""
    from runner.agentfile.files import inspect_file
    from runner.agentfile.workflow import build_workflow

    loaded, errors = inspect_file(path, extra_vars=extra_vars)
    if errors:
        raise ConfigErrors(errors)
    assert loaded is not None
    return build_workflow(loaded.document) if loaded.is_team else None
