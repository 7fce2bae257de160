"""Agent Skills (issue 26): what each skill costs the first request until the model loads one.

Target: the system prompt grows by at most ~100 tokens per skill. The first request (system prompt
and tool definitions, as ``runner render`` shows them) is counted with 0, 1, 10 and 50 skills, for
typical skills (a 20-character name, a 200-character description) and for the largest the
specification allows (64-character names, 1,024-character descriptions). Tokens are cl100k_base
(tiktoken, from the tokenizer files litellm ships; without them: characters / 4). Also: how long
``load_agent`` takes to check 50 skills, and what loading one skill adds (its body, as a tool result).

Run: ``python -m bench.skills``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import runner.agentfile.skills as skills_module
from runner.agentfile import load_agent
from runner.runtime import RuntimeSettings, build_runtime
from runner.testing import ScriptedModel

TARGET_PER_SKILL = 100
COUNTS = (0, 1, 10, 50)
BODY = "# Steps\n\n" + "".join(f"{i}. Do step {i} of the task carefully, then check it.\n" for i in range(40))


def tokenizer() -> tuple[str, Callable[[str], int]]:
    """cl100k_base when its files are at hand (litellm ships them), else characters / 4."""
    try:
        spec = importlib.util.find_spec("litellm")  # located, not imported (that is seconds)
        if spec is not None and spec.origin:
            shipped = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
            os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(shipped))
        import tiktoken

        encoding = tiktoken.get_encoding("cl100k_base")
        return "cl100k_base", lambda text: len(encoding.encode(text))
    except Exception:  # no tiktoken, or no files offline
        return "characters / 4", lambda text: (len(text) + 3) // 4


def write_skills(folder: Path, count: int, *, largest: bool) -> None:
    for i in range(count):
        name = (f"skill-{i:02d}-" + "x" * 64)[:64] if largest else f"team-skill-number-{i:02d}"
        words = "Use this skill when the user asks for the task it covers, in the team's own format. "
        description = (words * 20)[:1024] if largest else (words * 3)[:200]
        skill = folder / "skills" / name
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{BODY}")


async def first_request_tokens(agent: Path, count: Callable[[str], int]) -> tuple[int, int]:
    """Tokens of the system prompt and of the tool definitions of ``agent``'s first request."""
    config = load_agent(agent)
    settings = RuntimeSettings(home=agent.parent / "home")
    runtime = await build_runtime(config, settings, model=ScriptedModel([]))
    try:
        system = runtime.prompts.system("hi", {})
        tools = runtime.registry.definitions()
        return count(system["content"] if system else ""), count(json.dumps(tools)) if tools else 0
    finally:
        await runtime.aclose()


def measure(root: Path, count: Callable[[str], int], *, largest: bool) -> dict[int, tuple[int, int]]:
    results = {}
    for n in COUNTS:
        folder = root / f"{'largest' if largest else 'typical'}-{n}"
        write_skills(folder, n, largest=largest)
        folder.mkdir(parents=True, exist_ok=True)
        agent = folder / "agent.yaml"
        agent.write_text(
            "version: 1\nname: bench\nmodel: openai/scripted\nprompts:\n  system: You help.\nskills: true\n"
        )
        results[n] = asyncio.run(first_request_tokens(agent, count))
    return results


def load_ms(root: Path) -> float:
    agent = root / "typical-50" / "agent.yaml"
    samples = []
    for _ in range(5):
        skills_module._CACHE.clear()  # each SKILL.md read and checked again, as in a new process
        start = time.perf_counter()
        load_agent(agent)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.skills", description=__doc__)
    parser.parse_args(argv)
    name, count = tokenizer()
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print(f"## skills: first-request tokens ({name}), system prompt + tool definitions")
        for largest in (False, True):
            results = measure(root, count, largest=largest)
            base = sum(results[0])
            rows = "  ".join(f"{n}: {s}+{t}" for n, (s, t) in results.items())
            per = (sum(results[50]) - sum(results[1])) / 49
            fixed = sum(results[1]) - base - per
            worst = max(worst, per)
            kind = "largest (64-char names, 1,024-char descriptions)" if largest else "typical (200 chars)"
            print(f"{kind}: {rows}")
            print(f"  per skill {per:.1f} tokens, once for the section and two tools {fixed:.0f}")
        body = count(BODY)
        print(f"loading one skill adds its body as a tool result: {body} tokens here (a 40-line SKILL.md)")
        print(f"load_agent with 50 skills (each SKILL.md checked): {load_ms(root):.1f} ms (median of 5)")
    ok = worst <= TARGET_PER_SKILL
    print(f"worst per skill {worst:.1f} tokens: {'ok' if ok else f'OVER {TARGET_PER_SKILL}'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
