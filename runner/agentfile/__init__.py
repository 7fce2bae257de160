"""The agent file: YAML with positions -> ``${ENV}`` -> ``extends`` -> JSON Schema -> checks -> AgentConfig.

Module map:

- ``files``: the entry points (``load_agent``, ``load_file``, ``check_file``, ``find_agent``) and
  ``AgentFile``, a checked file of one agent or a team.
- ``survey``: one pass that collects every problem (unset variables, ``extends``, schema, then the
  semantic checks of the parts that passed), so ``runner validate`` reports them all at once.
- ``discover``: which YAML files of a folder are agents (scripts and ``extends`` fragments are not).
- ``yamlsrc``: YAML with line and column of every value, duplicate keys and alias bombs refused.
- ``interpolate``: ``${VAR}`` / ``${VAR:-default}`` and which values are secrets.
- ``loader``: ``extends`` chains (deep merge, cycles) and ``--explain``.
- ``validate``: the JSON Schema check with located errors and "did you mean".
- ``checks``: what a schema cannot see (imports, templates, variables, references).
- ``build``: checked data -> the typed ``config`` dataclasses; ``config``: ``AgentConfig`` and its
  parts, and ``HOOK_EVENT_RULES`` (what a hook can do at each event).
- ``revisions``: ``--rev REV`` and ``git+URL#REV:path``: a commit's tree read from git's objects
  into a cache, and the rules for files at a revision (nothing outside the tree, nothing uncommitted).
- ``templates``: the Jinja sandbox; ``imports``: ``module:function`` references; ``schema_doc``:
  ``docs/format.md`` from the schema.

Nothing here runs an agent; everything above uses the ``AgentConfig`` this package builds.
"""

from __future__ import annotations

from runner.agentfile.config import AgentConfig
from runner.agentfile.files import (
    AgentFile,
    agent_at,
    check_file,
    config_from_file,
    find_agent,
    load_agent,
    load_file,
)

__all__ = [
    "AgentConfig",
    "AgentFile",
    "agent_at",
    "check_file",
    "config_from_file",
    "find_agent",
    "load_agent",
    "load_file",
]
