"""``runner init``: a new agent, a tool module and a test, which validate and pass as created."""

from __future__ import annotations

import re
from pathlib import Path

from runner.errors import ConfigError

__all__ = ["AGENT_TEMPLATE", "GITIGNORE_TEMPLATE", "TEST_TEMPLATE", "TOOLS_TEMPLATE", "scaffold"]

AGENT_TEMPLATE = """\
# yaml-language-server: $schema=https://runner.dev/schemas/agent.schema.json
# Format reference: `runner schema`, or docs/format.md in the runner repository.
version: 1
name: {name}
description: A starting point. Edit the prompt, add tools, run it.

model:
  id: ${{RUNNER_MODEL:-openai/gpt-4o-mini}}
  api_base: ${{OPENAI_BASE_URL:-}}  # a local OpenAI-compatible server (the fast path), or empty
  api_key: ${{OPENAI_API_KEY:-}}

prompts:
  system: |
    You are {name}, a concise assistant. Today is {{{{ now('%Y-%m-%d') }}}}.
    Use the tools when they help; answer in {{{{ style }}}} style.

vars:
  style: plain

tools:
  - python: {module}

limits:
  max_steps: 10

tests:
  - name: adds
    input: What is 2 + 3?
    cassette: tests/cassettes/adds.jsonl
    expect:
      tools_called: [add]
      output_contains: "5"
"""

TOOLS_TEMPLATE = '''\
"""Tools of the {name} agent: every public function here becomes a tool."""

from __future__ import annotations


def add(a: float, b: float) -> float:
    """Add two numbers.

    :param a: The first number.
    :param b: The second number.
    """
    return a + b


def word_count(text: str) -> int:
    """Count the words in a text.

    :param text: The text to count.
    """
    return len(text.split())
'''

TEST_TEMPLATE = '''\
"""Unit tests of the {name} agent's tools (run with pytest)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from {module} import add, word_count


def test_add_adds() -> None:
    assert add(2, 3) == 5


def test_word_count_counts_words() -> None:
    assert word_count("one two  three") == 3
'''


GITIGNORE_TEMPLATE = """\
# runner's sessions (transcripts) and caches
.runner/
__pycache__/
"""


def _module_name(name: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", name) + "_tools"


def scaffold(directory: Path, *, name: str | None = None) -> list[Path]:
    """Write the files of a new agent into ``directory``; never overwrite an existing file."""
    directory = directory.resolve()
    agent_name = name or re.sub(r"[^a-z0-9_-]", "-", directory.name.lower()).strip("-_") or "agent"
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", agent_name):
        raise ConfigError(
            f"invalid agent name '{agent_name}'",
            hint="use lowercase letters, digits, _ and -, starting with a letter or digit (--name NAME)",
        )
    module = _module_name(agent_name)
    files = {
        directory / "agent.yaml": AGENT_TEMPLATE.format(name=agent_name, module=module),
        directory / f"{module}.py": TOOLS_TEMPLATE.format(name=agent_name),
        directory / "tests" / f"test_{module}.py": TEST_TEMPLATE.format(name=agent_name, module=module),
    }
    if not (directory / ".gitignore").exists():  # an existing one is the user's: left as it is
        files[directory / ".gitignore"] = GITIGNORE_TEMPLATE
    existing = [p for p in files if p.exists()]
    if existing:
        raise ConfigError(
            "refusing to overwrite existing files: " + ", ".join(str(p) for p in existing),
            hint="choose an empty directory: runner init DIR",
        )
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)
