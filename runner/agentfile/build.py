"""Building the typed ``AgentConfig`` from data that passed the schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.agentfile.config import (
    SOURCE_KINDS,
    AgentConfig,
    ExpectConfig,
    HookConfig,
    LimitsConfig,
    McpServerConfig,
    ModelConfig,
    OutputConfig,
    PermissionsConfig,
    PromptsConfig,
    SelectorConfig,
    TemplateSource,
    TestCaseConfig,
    ToolSourceConfig,
)
from runner.agentfile.revisions import confine
from runner.agentfile.skills import Skill, discover_skills, skill_folders
from runner.agentfile.templates import read_template_file
from runner.agentfile.yamlsrc import Document, PathKey, error_at
from runner.errors import ConfigError, ConfigErrors

__all__ = ["build_agent", "build_model", "build_source", "origin_dir", "skills_of", "test_case"]

_LIMIT_FIELDS = set(LimitsConfig.__dataclass_fields__)


def origin_dir(doc: Document, path: PathKey) -> Path:
    """The directory of the file that wrote the value at ``path`` (relative paths start there)."""
    info = doc.sources.value(path)
    return Path(info.file).parent if info is not None else doc.path.parent


def _template(doc: Document, path: PathKey, value: Any) -> TemplateSource | None:
    if value is None:
        return None
    info = doc.sources.value(path)
    origin = Path(info.file) if info is not None else doc.path
    if isinstance(value, dict):
        file = (origin.parent / value["file"]).resolve()
        try:
            confine(origin, file, what="the template file")
            text = read_template_file(file, shown=value["file"]) if file.is_file() else ""
        except ConfigError as exc:
            raise error_at(
                exc.message, doc.sources.value((*path, "file")), (*path, "file"), hint=exc.hint
            ) from None
        return TemplateSource(text=text, origin=origin, line=1, file=file, written=str(value["file"]))
    line = info.line if info is not None else 1
    if info is not None and info.block_scalar:
        line += 1  # a `|` or `>` block's text starts on the next line
    return TemplateSource(text=str(value), origin=origin, line=line)


def _output(doc: Document, path: PathKey, value: Any) -> OutputConfig | None:
    """``output:`` as an ``OutputConfig``; a schema file is read here (``runner validate`` checked it)."""
    from runner.agentfile.output_schema import output_form, read_schema_file

    if value is None:
        return None
    base = origin_dir(doc, path)
    form = output_form(value)
    if form == "python":
        return OutputConfig(python=value["python"], base_dir=base)
    if form == "file":
        file = (base / value["file"]).resolve()
        try:
            confine(base / "_", file, what="the output schema file")
            schema, _ = read_schema_file(file, value["file"])
        except ConfigError as exc:
            raise error_at(
                exc.message, doc.sources.value((*path, "file")), (*path, "file"), hint=exc.hint
            ) from None
        return OutputConfig(schema=schema, file=file, base_dir=base)
    return OutputConfig(schema=dict(value), base_dir=base)


def build_model(value: Any) -> ModelConfig | None:
    """``model:`` as a ``ModelConfig`` (a string is the id)."""
    if value is None:
        return None
    if isinstance(value, str):
        return ModelConfig(id=value)
    fields = dict(value)
    fields["fallbacks"] = tuple(fields.get("fallbacks", ()))
    for key in ("api_base", "api_key"):
        if fields.get(key) in ("", None):
            fields.pop(key, None)
    return ModelConfig(**{k: v for k, v in fields.items() if not k.startswith("x-")})


def build_source(doc: Document, path: PathKey, entry: dict[str, Any], index: int) -> ToolSourceConfig:
    """The ``ToolSourceConfig`` of the checked tool entry at ``path`` (``tools[index]``)."""
    kind = next(k for k in SOURCE_KINDS if k in entry)
    base = origin_dir(doc, path)
    target = entry[kind]
    where = doc.sources.value(path)
    mcp = None
    if kind == "mcp":
        if isinstance(target, dict):
            cwd = target.get("cwd")
            mcp = McpServerConfig(
                command=target["command"],
                args=tuple(str(a) for a in target.get("args", ())),
                env={k: str(v) for k, v in target.get("env", {}).items()},
                cwd=(base / cwd).resolve() if cwd else None,
            )
            target = " ".join([target["command"], *mcp.args])
        else:
            mcp = McpServerConfig(url=target)
    return ToolSourceConfig(
        kind=kind,
        target=str(target),
        base_dir=base,
        id=entry.get("id"),
        include=tuple(entry.get("include", ())),
        exclude=tuple(entry.get("exclude", ())),
        prefix=bool(entry.get("prefix", False)),
        confirm=entry.get("confirm"),
        timeout_s=entry.get("timeout_s"),
        headers=dict(entry.get("headers", {})),
        base_url=entry.get("base_url"),
        options=dict(entry.get("with", {})),
        mcp=mcp,
        description=entry.get("description"),
        index=index,
        line=where.line if where else 0,
        column=where.column if where else 0,
    )


def _hook(doc: Document, path: PathKey, entry: dict[str, Any]) -> HookConfig:
    kind = next(k for k in ("python", "command", "message") if k in entry)
    return HookConfig(
        kind=kind,
        value=entry[kind],
        base_dir=origin_dir(doc, path),
        role=entry.get("role", "user"),
        timeout_s=float(entry.get("timeout_s", 30.0)),
        required=bool(entry.get("required", False)),
    )


def test_case(doc: Document, path: PathKey, entry: dict[str, Any]) -> TestCaseConfig:
    """One entry of ``tests:`` (an agent's, or a team file's workflow's)."""
    expect = dict(entry.get("expect", {}))
    contains = expect.get("output_contains", ())
    cassette = entry.get("cassette")
    return TestCaseConfig(
        name=entry["name"],
        input=entry["input"],
        cassette=(origin_dir(doc, (*path, "cassette")) / cassette).resolve() if cassette else None,
        vars=dict(entry.get("vars", {})),
        expect=ExpectConfig(
            output_contains=(contains,) if isinstance(contains, str) else tuple(contains),
            output_matches=expect.get("output_matches"),
            tools_called=tuple(expect.get("tools_called", ())),
            ordered=bool(expect.get("ordered", False)),
            max_steps=expect.get("max_steps"),
            output_schema=expect.get("output_schema"),
            output_json=dict(expect.get("output_json", {})),
            judge=expect.get("judge"),
            tools_refused=tuple(expect.get("tools_refused", ())),
            status=expect.get("status"),
        ),
        repeat=int(entry.get("repeat", 1)),
        yes=bool(entry.get("yes", False)),
    )


def skills_of(doc: Document, path: PathKey, value: Any) -> tuple[list[Skill], list[ConfigError]]:
    """The skills ``skills:`` (at ``path``) names, and the problems of their ``SKILL.md`` files."""
    where = error_at("", doc.sources.value(path), path)
    return discover_skills(skill_folders(value, origin_dir(doc, path)), where=where)


def _skills(doc: Document, path: PathKey, value: Any) -> tuple[Skill, ...]:
    skills, errors = skills_of(doc, path, value)
    if errors:  # checked by `runner validate`; changed since
        raise ConfigErrors(errors)
    return tuple(skills)


def _skills_source(doc: Document, path: PathKey, skills: tuple[Skill, ...], index: int) -> ToolSourceConfig:
    """The ``builtin: skills`` source that ``skills:`` adds after ``tools:`` (its tools and prompt list)."""
    where = doc.sources.value(path)
    return ToolSourceConfig(
        kind="builtin",
        target="skills",
        base_dir=origin_dir(doc, path),
        id="skills",
        options={"folders": [str(s.folder) for s in skills]},
        description="Agent Skills (skills:)",
        index=index,
        line=where.key_line if where and where.key_line else (where.line if where else 0),
        column=where.key_column if where and where.key_line else (where.column if where else 0),
    )


def build_agent(doc: Document, prefix: PathKey = (), *, team: tuple[str, ...] = ()) -> AgentConfig:
    """The ``AgentConfig`` of the body at ``prefix`` of a validated document."""
    node: Any = doc.data
    for part in prefix:
        node = node[part]
    body: dict[str, Any] = node
    name = body.get("name") or (str(prefix[-1]) if prefix else "")
    prompts = body.get("prompts", {})
    selector = body.get("selector", {})
    permissions = body.get("permissions", {})
    limits = {k: v for k, v in body.get("limits", {}).items() if k in _LIMIT_FIELDS}
    tools = tuple(
        build_source(doc, (*prefix, "tools", i), entry, i) for i, entry in enumerate(body.get("tools", ()))
    )
    skills = _skills(doc, (*prefix, "skills"), body.get("skills"))
    if skills:
        tools = (*tools, _skills_source(doc, (*prefix, "skills"), skills, len(tools)))
    return AgentConfig(
        name=name,
        path=doc.path,
        model=build_model(body.get("model")),
        description=body.get("description", ""),
        function_calling=body.get("function_calling", "auto"),
        tool_format=body.get("tool_format", "xml"),
        selector=SelectorConfig(
            model=selector.get("model"), rounds=selector.get("rounds", 1), history=selector.get("history", 4)
        ),
        prompts=PromptsConfig(
            **{
                key: _template(doc, (*prefix, "prompts", key), prompts.get(key))
                for key in ("system", "user", "status", "tool_selection")
            }
        ),
        vars=dict(body.get("vars", {})),
        tools=tools,
        permissions=PermissionsConfig(
            allow=tuple(permissions.get("allow", ())),
            ask=tuple(permissions.get("ask", ())),
            deny=tuple(permissions.get("deny", ())),
        ),
        hooks={
            event: tuple(_hook(doc, (*prefix, "hooks", event, i), h) for i, h in enumerate(chain))
            for event, chain in body.get("hooks", {}).items()
            if not event.startswith("x-")
        },
        limits=LimitsConfig(**limits),
        output=_output(doc, (*prefix, "output"), body.get("output")),
        tool_details=bool(body.get("serve", {}).get("tool_details", True)),
        tests=tuple(test_case(doc, (*prefix, "tests", i), t) for i, t in enumerate(body.get("tests", ()))),
        evals=tuple(test_case(doc, (*prefix, "evals", i), t) for i, t in enumerate(body.get("evals", ()))),
        judge=build_model(body.get("judge")),
        secrets=frozenset(doc.secrets | _api_keys(body)),
        team=team,
        skills=skills,
    )


def _api_keys(body: dict[str, Any]) -> set[str]:
    keys = set()
    for model in (body.get("model"), body.get("judge")):
        if isinstance(model, dict) and isinstance(model.get("api_key"), str) and model["api_key"]:
            keys.add(model["api_key"])
    return keys
