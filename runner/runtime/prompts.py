"""An agent's prompt templates, rendered into request messages (SPEC section 7, request layout).

``Prompts`` belongs to a runtime: it holds the template engine (compiled templates are cached), the
server instructions and the mode's system-prompt section, and renders with the variables a session
passes in (the agent's ``vars`` under ``--var`` and ``/vars``). ``system`` composes the whole system
message (the agent's prompt, then the instructions MCP servers sent, then the mode's section): the
one place a system prompt is made, for new conversations and restored ones alike. The status
template is rendered before every step and sent last, never stored in the history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runner.agentfile.config import AgentConfig, TemplateSource
from runner.agentfile.templates import TemplateEngine, template_context

__all__ = ["DEFAULT_USER_TEMPLATE", "Prompts", "compose_system"]

DEFAULT_USER_TEMPLATE = "{{ input }}"


class Prompts:
    """Renders one agent's templates; the variables come from the session that asks."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        tools: Sequence[dict[str, Any]] = (),
        instructions: Sequence[str] = (),
        section: str | None = None,
        clock: Callable[..., str] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.tools = list(tools)
        self.instructions = [i for i in instructions if i.strip()]
        self.section = section
        self.engine = TemplateEngine(config.directory)
        self._user = config.prompts.user or TemplateSource(DEFAULT_USER_TEMPLATE, origin=config.path)

    def variables(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The agent's ``vars`` with ``overrides`` on top."""
        return {**self.config.vars, **(overrides or {})}

    def render(
        self,
        source: TemplateSource,
        input: str,
        variables: Mapping[str, Any],
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        """Render any template of this agent (hook messages too) with the usual names + ``extra``."""
        context = template_context(
            input=input, variables=variables, tools=self.tools, agent=self.config.name, clock=self.clock
        )
        if extra:
            context.update(extra)
        return self.engine.render(source, context)

    def system(self, first_input: str, variables: Mapping[str, Any]) -> dict[str, Any] | None:
        """The system message of a conversation whose first input is ``first_input``, or None."""
        template = self.config.prompts.system
        prompt = None
        if template is not None:
            prompt = {"role": "system", "content": self.render(template, first_input, variables)}
        return compose_system(prompt, self.instructions, self.section)

    def user(self, input: str, variables: Mapping[str, Any]) -> dict[str, Any]:
        """The user message that wraps ``input``."""
        return {"role": "user", "content": self.render(self._user, input, variables)}

    def status(self, input: str, variables: Mapping[str, Any]) -> dict[str, Any] | None:
        """The status message sent last in every request, or None."""
        if self.config.prompts.status is None:
            return None
        return {"role": "user", "content": self.render(self.config.prompts.status, input, variables)}


def compose_system(
    system: dict[str, Any] | None, instructions: Sequence[str], section: str | None
) -> dict[str, Any] | None:
    """The system message: the agent's prompt, then server instructions, then the mode's tool section."""
    extra = [*instructions, *([section] if section else [])]
    if not extra:
        return system
    text = "\n\n".join(([system["content"]] if system else []) + extra)
    return {"role": "system", "content": text}
