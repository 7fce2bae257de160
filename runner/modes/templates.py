"""The modes' own prompt templates (``runner/modes/prompts/*.j2``), rendered in Jinja's sandbox.

Shared by the non-native modes: the selector prompt of ``prompt`` and the tool instructions of ``inline``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2
from jinja2.sandbox import SandboxedEnvironment

__all__ = ["PROMPTS_DIR", "prompt_environment"]

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"


@cache
def prompt_environment() -> SandboxedEnvironment:
    """One sandboxed environment loading from ``PROMPTS_DIR`` (strict about undefined names)."""
    return SandboxedEnvironment(
        undefined=jinja2.StrictUndefined,
        loader=jinja2.FileSystemLoader(str(PROMPTS_DIR)),
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
