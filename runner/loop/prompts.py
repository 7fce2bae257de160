"""Rendering an agent's prompts into request messages (SPEC section 7, request layout).

The system message is rendered once per session (so consecutive requests share a byte-identical
prefix), the user template wraps every input, and the optional status template is rendered
before every step and sent last, never stored in the history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from runner.agentfile.config import AgentConfig, TemplateSource
from runner.agentfile.templates import TemplateEngine, template_context

DEFAULT_USER_TEMPLATE = "{{ input }}"


class PromptRenderer:
    """Renders one agent's templates with its variables (``vars`` overridden by ``--var``)."""

    def __init__(
        self,
        spec: AgentConfig,
        *,
        variables: Mapping[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        clock: Callable[..., str] | None = None,
    ) -> None:
        self.spec = spec
        self.clock = clock
        self.variables = {**spec.vars, **(variables or {})}
        self.tools = tools or []
        self.engine = TemplateEngine(spec.directory)
        self._user = spec.prompts.user or TemplateSource(DEFAULT_USER_TEMPLATE, origin=spec.path)

    def render(self, source: TemplateSource, input: str, extra: Mapping[str, Any] | None = None) -> str:
        """Render any template of this agent (hook messages, too) with the usual context + ``extra``."""
        return self._render(source, input, extra)

    def _render(self, source: TemplateSource, input: str, extra: Mapping[str, Any] | None = None) -> str:
        context = template_context(
            input=input, variables=self.variables, tools=self.tools, agent=self.spec.name, clock=self.clock
        )
        if extra:
            context.update(extra)
        return self.engine.render(source, context)

    def system(self, first_input: str = "") -> dict[str, Any] | None:
        """The system message, or None when the agent has no system prompt."""
        if self.spec.prompts.system is None:
            return None
        return {"role": "system", "content": self._render(self.spec.prompts.system, first_input)}

    def user(self, input: str) -> dict[str, Any]:
        """The user message that wraps ``input``."""
        return {"role": "user", "content": self._render(self._user, input)}

    def status(self, input: str = "") -> dict[str, Any] | None:
        """The status message sent last in every request, or None."""
        if self.spec.prompts.status is None:
            return None
        return {"role": "user", "content": self._render(self.spec.prompts.status, input)}


def compose_system(
    system: dict[str, Any] | None, instructions: list[str], section: str | None
) -> dict[str, Any] | None:
    """The system message: the agent's prompt, then server instructions, then the mode's tool section."""
    extra = instructions + ([section] if section else [])
    if not extra:
        return system
    text = "\n\n".join(([system["content"]] if system else []) + extra)
    return {"role": "system", "content": text}
