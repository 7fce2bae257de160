"""What the MCP door offers: one tool per served agent and per workflow, described from the catalog.

- **name**: the agent's (or workflow's) name, as ``/v1/models`` lists it;
- **description**: its ``description:`` (a workflow's: its steps and agents), secrets masked;
- **input**: ``message`` (a string) and, for an agent, an optional ``session_id`` that continues an
  earlier conversation (a workflow runs once per call: it has none);
- **output**: ``{response, session_id}``: ``response`` is the answer's text, or the agent's
  ``output:`` schema (a workflow's ``output_schema``); its ``$defs`` move to the top so references
  still resolve;
- **annotations**: ``readOnlyHint`` (and ``destructiveHint: false``) only for an agent with no tools
  at all (a workflow: none of its agents has any). Tools record no read-only flag, so an agent with
  any tool says nothing and MCP's pessimistic defaults apply (docs/mcp-server.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from runner.agentfile.config import AgentConfig
from runner.errors import RunnerError
from runner.serve.catalog import ServedAgent, ServedWorkflow
from runner.serve.outward import outward

__all__ = [
    "Shapes",
    "ToolShape",
    "input_schema",
    "output_schema",
    "read_only",
    "response_schema",
    "tool_shape",
]

MESSAGE = {"type": "string", "description": "What to ask the agent (the user's message of this turn)."}
SESSION_ID = {
    "type": "string",
    "description": "The session_id of an earlier answer, to continue that conversation; omit to start one.",
}


def input_schema(*, continues: bool) -> dict[str, Any]:
    """The tool's arguments: ``message``, and ``session_id`` when the conversation can continue."""
    properties: dict[str, Any] = {"message": dict(MESSAGE)}
    if continues:
        properties["session_id"] = dict(SESSION_ID)
    return {
        "type": "object",
        "properties": properties,
        "required": ["message"],
        "additionalProperties": False,
    }


def output_schema(response: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{response, session_id}``, ``response`` text or the given schema (its ``$defs`` hoisted)."""
    inner = dict(response) if response is not None else {"type": "string", "description": "The answer."}
    hoisted: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        if key in inner:
            hoisted[key] = inner.pop(key)
    inner.pop("$schema", None)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "response": inner,
            "session_id": {
                "type": "string",
                "description": "Continues this conversation (or names its transcript).",
            },
        },
        "required": ["response", "session_id"],
    }
    schema.update(hoisted)
    return schema


def response_schema(config: AgentConfig) -> Mapping[str, Any] | None:
    """The agent's ``output:`` schema (a ``python:`` model imported), or None for free text."""
    if config.output is None:
        return None
    from runner.agentfile.output_schema import load_output

    try:
        return load_output(config.output, name=config.name).schema
    except RunnerError:  # the runtime refuses it too, with the same error, when a call runs
        return {}


def read_only(configs: Iterable[AgentConfig]) -> bool:
    """Whether every agent here has no tools at all (then it can change nothing but its transcript)."""
    return all(not config.tools for config in configs)


class ToolShape:
    """One served agent's or workflow's MCP tool, as plain JSON data (the SDK's ``Tool`` is made of it)."""

    def __init__(self, served: ServedAgent | ServedWorkflow) -> None:
        self.name = served.name
        if isinstance(served, ServedWorkflow):
            configs = list(served.configs.values())
            secrets = frozenset().union(*(config.secrets for config in configs))
            own = served.workflow.output_schema
            self.description = outward(f"Runs the workflow {served.name}: {served.description()}.", secrets)
            self.input_schema = input_schema(continues=False)
            self.output_schema = output_schema(own)
            self.structured = own is not None
        else:
            configs = [served.config]
            text = served.config.description or f"Ask the agent {served.name}."
            self.description = outward(text, served.config.secrets)
            self.input_schema = input_schema(continues=True)
            response = response_schema(served.config)
            self.output_schema = output_schema(response)
            self.structured = response is not None
        self.read_only = read_only(configs)
        self.continues = not isinstance(served, ServedWorkflow)

    def annotations(self) -> dict[str, Any]:
        """The tool's annotations: its title, and read-only only when it is (``read_only``)."""
        hints: dict[str, Any] = {"title": self.name}
        if self.read_only:
            hints.update(read_only_hint=True, destructive_hint=False)
        return hints


Shapes = dict[str, tuple[ServedAgent | ServedWorkflow, ToolShape]]


def tool_shape(served: ServedAgent | ServedWorkflow, cache: Shapes) -> ToolShape:
    """The tool of ``served``, made once per served object (a reload gives a new one)."""
    cached = cache.get(served.name)
    if cached is not None and cached[0] is served:
        return cached[1]
    shape = ToolShape(served)
    cache[served.name] = (served, shape)
    return shape
