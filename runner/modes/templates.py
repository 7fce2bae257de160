"""The modes' own prompt templates (``runner/modes/prompts/*.j2``), rendered in the bounded sandbox.

Shared by the non-native modes: the selector prompt of ``prompt`` and the tool instructions of ``inline``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2

from runner.agentfile.sandbox import BoundedLoader, BoundedSandbox

__all__ = ["PROMPTS_DIR", "prompt_environment"]

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"


@cache
def prompt_environment() -> BoundedSandbox:
    """One bounded sandbox loading from ``PROMPTS_DIR`` (strict about undefined names)."""
    return BoundedSandbox(
        undefined=jinja2.StrictUndefined,
        loader=BoundedLoader(str(PROMPTS_DIR)),
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
