"""The import graph of runner's packages is one-way (docs/architecture.md): each imports only below it."""

from __future__ import annotations

import ast
from pathlib import Path

import runner

PACKAGE = Path(runner.__file__).resolve().parent

#: Lowest first; a package may import only packages of a lower rank (docs/architecture.md).
LAYERS: list[set[str]] = [
    {"errors", "text", "redact"},
    {"resources", "env_settings"},
    {"agentfile"},
    {"tools", "audit"},
    {"models"},
    {"store"},
    {"modes"},
    {"runtime"},
    {"session"},
    {"watch"},
    {"workflow"},
    {"serve", "testing", "api", "batch", "agentdiff"},
    {"evals"},
    {"integrations", "cli"},
    {"__main__"},
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "runner":
            found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names if alias.name.split(".")[0] == "runner")
    return found


def test_every_package_imports_only_the_layers_below_it() -> None:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative == Path("__init__.py"):
            continue  # the public surface re-exports from every layer
        own = relative.parts[0].removesuffix(".py")
        assert own in RANK, f"{relative}: a package docs/architecture.md does not place"
        for module, names in _imports(path):
            parts = module.split(".")
            if len(parts) == 1:  # ``from runner import __version__``: the version, nothing else
                if names != ["__version__"]:
                    problems.append(f"{relative}: from runner import {', '.join(names)}")
                continue
            target = parts[1]
            if target != own and RANK[target] >= RANK[own]:
                problems.append(f"{relative} imports {module} ({own} may not use {target})")
    assert not problems, "\n".join(problems)


def test_the_session_layer_never_asks_which_mode_it_runs() -> None:
    for path in (PACKAGE / "session").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for asking in ("mode.kind ==", "mode.kind !=", "mode.kind in", "isinstance(self.runtime.mode"):
            assert asking not in text, f"{path.name}: {asking}"
        for module in ("runner.modes.native", "runner.modes.inline", "runner.modes.prompt"):
            assert module not in text, f"{path.name} imports {module}"
