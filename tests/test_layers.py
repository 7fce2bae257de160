"""The import graph of runner's packages is one-way (docs/architecture.md): each imports only below it.

And no module of ``runner`` or ``toolsets`` imports itself back through others: every import counts
(module level, inside functions, under ``TYPE_CHECKING``, ``importlib.import_module`` of a name
the code spells out), because each one means the two modules know each other.
"""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

import runner
import toolsets

PACKAGE = Path(runner.__file__).resolve().parent
TOOLSETS = Path(toolsets.__file__).resolve().parent

#: Lowest first; a package may import only packages of a lower rank (docs/architecture.md).
LAYERS: list[set[str]] = [
    {"errors", "text", "redact", "version", "tls"},
    {"resources", "env_settings", "telemetry"},
    {"agentfile"},
    {"tools", "audit"},
    {"models"},
    {"store"},
    {"modes"},
    {"runtime"},
    {"session"},
    {"watch"},
    {"workflow"},
    {"runnable"},
    {"serve", "testing", "api", "batch", "agentdiff", "acp"},
    {"evals"},
    {"report"},
    {"integrations", "cli"},
    {"__main__"},
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module.split(".")[0] == "runner":
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
            if len(parts) == 1:  # the package face sits above every layer (the version: ``runner.version``)
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


def test_toolsets_use_only_the_tools_layer_and_below() -> None:
    # ``runner.tools.builtin`` loads the toolsets, so they sit with ``tools``: what they import of the
    # runner is the toolset contract (``runner.tools.toolset``) and the layers below, never the loader
    problems = []
    for path in sorted(TOOLSETS.rglob("*.py")):
        for module, _names in _imports(path):
            parts = module.split(".")
            if len(parts) == 1 or RANK[parts[1]] > RANK["tools"] or module == "runner.tools.builtin":
                problems.append(f"toolsets/{path.relative_to(TOOLSETS)} imports {module}")
    assert not problems, "\n".join(problems)


# ----------------------------------------------------------------- no import cycles, counted strictly


def _modules() -> dict[str, Path]:
    """Every module of ``runner`` and ``toolsets`` by its dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for root in (PACKAGE, TOOLSETS):
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = [root.name, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _absolute(node: ast.ImportFrom, current: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = current.split(".") if is_package else current.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _dynamic(node: ast.AST) -> str | None:
    """The name (or the fixed start of it) of an ``importlib.import_module(...)`` call, if spelled out."""
    if not (isinstance(node, ast.Call) and node.args):
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name not in ("import_module", "__import__"):
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value) + "*"  # f"toolsets.{name}": any module under ``toolsets.``
    return None


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module ``import name`` loads (``a.b.c`` when it exists, else the nearest package above)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _faces(modules: dict[str, Path]) -> dict[str, dict[str, str]]:
    """For each package: the names its ``__init__`` hands on, and the module each comes from."""
    faces: dict[str, dict[str, str]] = {}
    for name, path in modules.items():
        if path.name == "__init__.py":
            table = faces.setdefault(name, {})
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and _absolute(node, name, True) in modules:
                    for alias in node.names:
                        table[alias.asname or alias.name] = _absolute(node, name, True)
    return faces


def _targets(
    node: ast.AST, current: str, is_package: bool, modules: dict[str, Path], faces: dict[str, dict[str, str]]
) -> set[str]:
    found: set[str] = set()
    if isinstance(node, ast.Import):
        found |= {m for alias in node.names if (m := _resolve(alias.name, modules))}
    elif isinstance(node, ast.ImportFrom):
        source = _absolute(node, current, is_package)
        for alias in node.names:
            if f"{source}.{alias.name}" in modules:
                found.add(f"{source}.{alias.name}")
            elif source in modules:  # a name of a package face: the module it takes the name from
                found.add(faces.get(source, {}).get(alias.name, source))
    elif (dynamic := _dynamic(node)) is not None:
        if dynamic.endswith("*"):
            found |= {m for m in modules if m.startswith(dynamic[:-1]) and m != dynamic[:-1]}
        elif (m := _resolve(dynamic, modules)) is not None:
            found.add(m)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules it imports, every import counted (functions and ``TYPE_CHECKING`` too).

    A package's ``__init__`` that only hands names on (``from .x import name``) is not a module of
    its own in the graph: importing a name from it is importing the module that defines the name.
    """
    modules = _modules()
    faces = _faces(modules)
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        handed_on = set(faces.get(name, {}).values())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _targets(node, name, is_package, modules, faces):
                passes_on = is_package and isinstance(node, ast.ImportFrom) and target in handed_on
                if target == name or passes_on:
                    continue
                edges[name].add(target)
    return edges


def import_tangles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The sets of modules that import each other round (strongly connected, more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    tangles: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            tangle = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                tangle.add(w)
                if w == v:
                    break
            if len(tangle) > 1:
                tangles.append(tangle)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return tangles


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One import cycle of each tangle, as a path ``a -> b -> ... -> a`` from its first module."""
    return [_shortest_cycle(min(tangle), tangle, edges) for tangle in import_tangles(edges)]


def _shortest_cycle(start: str, tangle: set[str], edges: dict[str, set[str]]) -> list[str]:
    """The shortest path from ``start`` back to itself inside ``tangle`` (breadth first)."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(edges[v] & tangle):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, v, start]
            if w not in came_from:
                came_from[w] = v
                queue.append(w)
    raise AssertionError(f"{start} is in a tangle but on no cycle")


#: Cycles whose break is a change to a command body under rework (issue 24 items 4-5): each must
#: still be a cycle (the test says when one is gone, so it leaves this list), and no other may appear.
#: ``runner.cli.testcmd_workflow`` imports ``CaseOutcome``, ``_in_test_terms`` and ``_keep_recording``
#: of ``runner.cli.testcmd``, which imports ``run_workflow_case`` back: folding the workflow twin into
#: the runner interface ends it (or those three move to a module both import).
PENDING: set[frozenset[str]] = set()


def test_no_module_imports_itself_back() -> None:
    edges = import_graph()
    # the graph sees every kind of import: import_module(f"toolsets.{name}"), one inside a function,
    # one under TYPE_CHECKING
    assert "toolsets.files" in edges["runner.tools.builtin"]
    assert "runner.session.session" in edges["runner.session.subagent"]
    assert "runner.session.session" in edges["runner.cli.interactive"]
    tangles = [frozenset(tangle) for tangle in import_tangles(edges)]
    new = [
        " -> ".join(_shortest_cycle(min(tangle), set(tangle), edges))
        + f" ({len(tangle)} modules: {sorted(tangle)})"
        for tangle in tangles
        if tangle not in PENDING
    ]
    assert not new, "import cycles (each import counts: functions and TYPE_CHECKING too):\n" + "\n".join(new)
    gone = PENDING - set(tangles)
    assert not gone, f"no longer a cycle, take it out of PENDING: {sorted(sorted(c) for c in gone)}"


def test_the_cycle_check_finds_a_cycle_and_names_it() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert import_cycles(edges) == [["a", "b", "c", "a"]]
    assert import_tangles({**edges, "d": {"b"}}) == [{"a", "b", "c", "d"}]
