"""Function-calling modes (SPEC section 8): strategies the session uses without knowing which it runs.

Module map:

- ``base``: ``Mode`` (one per runtime: request shaping, system-prompt section, work before a turn's
  steps), ``ReplyReader`` (one per reply: stream filtering, tool calls, the history message, how
  results go back), ``TurnAccess`` (what a mode may use of a turn).
- ``native``: the provider's tool calls.
- ``inline``: tool blocks written in the reply (``<tool_call>`` or fenced blocks), with its parser.
- ``prompt``: a selector request picks tools before each turn (Open WebUI's non-native mode).
- ``thinking``: ``<think>`` text out of every reply; ``jsontext``: JSON found in model text;
  ``templates`` and ``prompts/``: the modes' own prompt templates.

Adding a mode is one module with a ``Mode`` subclass whose ``for_agent`` builds it, one entry in
``MODES`` and one value in the schema's ``function_calling`` enum.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from runner.agentfile.config import AgentConfig
from runner.models.base import Model
from runner.modes.base import Mode, ReplyReader, ResultMessage, TurnAccess

__all__ = ["MODES", "Mode", "ModeContext", "ReplyReader", "ResultMessage", "TurnAccess", "choose_mode"]

#: Each mode's class, imported when an agent uses it.
MODES: dict[str, str] = {
    "native": "runner.modes.native:NativeMode",
    "inline": "runner.modes.inline:InlineMode",
    "prompt": "runner.modes.prompt:PromptMode",
}


@dataclass(frozen=True)
class ModeContext:
    """What building a mode may need besides the agent file."""

    tool_names: tuple[str, ...] = ()
    #: Builds another model by id (the prompt mode's ``selector.model``); None: use the agent's.
    make_model: Callable[[str], Model] | None = None


def _mode_class(kind: str) -> Any:
    module, _, name = MODES[kind].partition(":")
    return getattr(importlib.import_module(module), name)


def choose_mode(
    config: AgentConfig,
    model: Model,
    definitions: Sequence[dict[str, Any]] | None,
    *,
    make_model: Callable[[str], Model] | None = None,
) -> Mode:
    """The mode an agent runs in, and why (``auto``: native when the model is known to call tools)."""
    context = ModeContext(tuple(d["function"]["name"] for d in definitions or ()), make_model)
    setting = config.function_calling
    if setting != "auto":
        mode: Mode = _mode_class(setting).for_agent(config, None, context)
        return mode
    supports = model.supports_tools
    if supports is None:
        why = "auto: the endpoint decides (OpenAI-compatible server, or a model litellm does not list)"
        kind = "native"
    elif supports:
        why, kind = f"auto: litellm lists {model.name} as supporting function calling", "native"
    else:
        why = (
            f"auto: litellm lists {model.name} without function calling, "
            f"so tools are {config.tool_format} blocks"
        )
        kind = "inline"
    auto: Mode = _mode_class(kind).for_agent(config, why, context)
    return auto
