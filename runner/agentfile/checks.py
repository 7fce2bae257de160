"""The checks a schema cannot make (SPEC section 4): imports, templates, references, secrets.

They also run on a file the schema refused: ``sound(path)`` says whether a part passed, and only
the parts that did are checked (a value of the wrong type is never looked into).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from runner.agentfile.build import origin_dir
from runner.agentfile.config import HOOK_EVENTS, MESSAGE_EVENTS, SOURCE_KINDS, OutputConfig, TemplateSource
from runner.agentfile.imports import resolve_callable
from runner.agentfile.revisions import confine
from runner.agentfile.templates import (
    BUILTIN_NAMES,
    HOOK_EVENT_NAMES,
    TemplateEngine,
    read_template_file,
    shown_path,
)
from runner.agentfile.validate import suggest
from runner.agentfile.yamlsrc import Document, NodeInfo, PathKey, error_at, format_path
from runner.errors import ConfigError, ConfigErrors

__all__ = ["SELECTOR_NAMES", "output_json_path_problem", "semantic_errors"]

#: What the prompt mode's selector template sees besides the usual names (runner.modes.prompt).
SELECTOR_NAMES = frozenset({"tools_json", "history"})

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def _everything_sound(path: PathKey) -> bool:
    return True


def _items(value: Any) -> list[tuple[Any, Any]]:
    """The entries of a mapping, or none when the value is not one (the schema reports that)."""
    return list(value.items()) if isinstance(value, dict) else []


def _entries(value: Any) -> list[tuple[int, dict[str, Any]]]:
    """The mappings of a list, by index; anything else the schema reports."""
    if not isinstance(value, list):
        return []
    return [(i, entry) for i, entry in enumerate(value) if isinstance(entry, dict)]


class _Checker:
    def __init__(
        self,
        doc: Document,
        prefix: PathKey,
        extra_vars: Iterable[str],
        team: Iterable[str],
        *,
        sound: Callable[[PathKey], bool],
        vars_known: bool,
    ) -> None:
        self.doc = doc
        self.prefix = prefix
        body: Any = doc.data
        for part in prefix:
            body = body[part]
        self.body: dict[str, Any] = body
        declared = self.body.get("vars", {})
        self.vars_known = vars_known and isinstance(declared, dict)
        self.variables = (set(declared) if isinstance(declared, dict) else set()) | set(extra_vars)
        self.team = set(team)
        self.sound = sound
        self.engine = TemplateEngine(doc.path.parent)
        self.errors: list[ConfigError] = []

    def at(self, *path: str | int) -> PathKey:
        return (*self.prefix, *path)

    def fail(self, message: str, path: PathKey, *, hint: str | None = None) -> None:
        self.errors.append(error_at(message, self.doc.sources.value(path), path, hint=hint))

    def run(self) -> list[ConfigError]:
        self.api_key()
        for key, value in _items(self.body.get("prompts")):
            path = self.at("prompts", key)
            if not str(key).startswith("x-") and value is not None and self.sound(path):
                extra = SELECTOR_NAMES if key == "tool_selection" else frozenset()
                self.template(path, value, extra_names=extra)
        for i, entry in _entries(self.body.get("tools")):
            self.source(self.at("tools", i), entry)
        if self.body.get("skills") not in (None, False) and self.sound(self.at("skills")):
            self.skills(self.at("skills"), self.body["skills"])
        if self.body.get("output") is not None and self.sound(self.at("output")):
            self.output(self.at("output"), self.body["output"])
        for key in ("tests", "evals"):
            for i, case in _entries(self.body.get(key)):
                if isinstance(case.get("expect"), dict) and self.sound(self.at(key, i, "expect")):
                    self.expect(self.at(key, i, "expect"), case["expect"])
        for event, chain in _items(self.body.get("hooks")):
            if str(event).startswith("x-"):
                continue
            for i, hook in _entries(chain):
                path = self.at("hooks", event, i)
                if not self.sound(path):
                    continue
                if "python" in hook:
                    self.importable(hook["python"], (*path, "python"))
                elif "message" in hook:
                    if event in HOOK_EVENTS and event not in MESSAGE_EVENTS:
                        self.fail(
                            f"a message hook at {event} would add nothing: {event} hooks cannot add messages",
                            (*path, "message"),
                            hint=f"messages can be added at {', '.join(MESSAGE_EVENTS)}",
                        )
                        continue
                    self.template((*path, "message"), hook["message"], extra_names=HOOK_EVENT_NAMES)
        return self.errors

    def api_key(self) -> None:
        for key in ("model", "judge"):
            self.literal_key(key)

    def literal_key(self, key: str) -> None:
        model = self.body.get(key)
        path = self.at(key, "api_key")
        if (
            isinstance(model, dict)
            and model.get("api_key")
            and path not in self.doc.interpolated
            and self.sound(path)
        ):
            self.fail(
                "a literal API key is not allowed in an agent file (it would end up in git)",
                path,
                hint="write api_key: ${OPENAI_API_KEY} (or your provider's variable) and set it in the "
                "environment",
            )

    def template(self, path: PathKey, value: Any, *, extra_names: frozenset[str] = frozenset()) -> None:
        info = self.doc.sources.value(path)
        origin = Path(info.file) if info is not None else self.doc.path
        if isinstance(value, dict):
            if not isinstance(value.get("file"), str):
                return  # the schema reports a template mapping without its file
            try:
                file = (origin.parent / value["file"]).resolve()
                text = read_template_file(file, shown=value["file"])
            except (OSError, RuntimeError, ValueError) as exc:  # the path itself cannot be used
                self.fail(f"cannot read template file {shown_path(value['file'])}: {exc}", (*path, "file"))
                return
            except ConfigError as exc:
                self.fail(exc.message, (*path, "file"), hint=exc.hint)
                return
            source = TemplateSource(text=text, origin=origin, file=file)
        else:
            line = info.line + (1 if info.block_scalar else 0) if info is not None else 1
            source = TemplateSource(text=str(value), origin=origin, line=line)
        static: list[ConfigError] = []
        try:
            static = self.engine.static_errors(source)
            for error in static:
                self.errors.append(self.in_template(error.message, source, info, path, line=error.line))
            names = self.engine.undeclared(source)
        except ConfigError as exc:
            if not static:  # else Jinja's complaint repeats one of ours (an unknown filter)
                self.errors.append(self.in_template(exc.message, source, info, path, line=exc.line))
            return
        for problem in self.engine.missing_includes(source):
            self.errors.append(self.in_template(problem, source, info, path))
        known = BUILTIN_NAMES | self.variables | extra_names
        undefined = names - known if self.vars_known else set()
        lines = self.engine.first_uses(source, undefined)
        for name in sorted(undefined):
            close = suggest(name, known)
            message = f"template uses undefined variable '{name}'"
            message += f" (did you mean '{close}'?)" if close else ""
            used_at = source.line + lines[name] - 1 if name in lines else None
            self.errors.append(
                self.in_template(
                    message,
                    source,
                    info,
                    path,
                    line=used_at,
                    hint=f"define it under vars: or pass --var {name}=...",
                )
            )

    def in_template(
        self,
        message: str,
        source: TemplateSource,
        info: NodeInfo | None,
        path: PathKey,
        *,
        line: int | None = None,
        hint: str | None = None,
    ) -> ConfigError:
        """An error at ``line`` of a template: in its file, or in the agent file for an inline one."""
        if source.file is not None:
            return ConfigError(
                message, file=source.name, line=line or 1, column=1, path=format_path(path), hint=hint
            )
        column = 1
        if info is not None and (line is None or line == info.line):
            column = info.column  # a one-line template: point at the value
        return ConfigError(
            message,
            file=source.name,
            line=line or source.line,
            column=column,
            path=format_path(path),
            hint=hint,
        )

    def skills(self, path: PathKey, value: Any) -> None:
        """Every ``SKILL.md`` of the ``skills:`` folders (errors located in the ``SKILL.md``)."""
        from runner.agentfile.build import skills_of
        from runner.agentfile.skills import skill_folders

        base = origin_dir(self.doc, path)
        for folder, _ in skill_folders(value, base):
            try:
                confine(base / "_", folder, what="the skills folder")
            except ConfigError as exc:
                self.fail(exc.message, path, hint=exc.hint)
                return
        self.errors += skills_of(self.doc, path, value)[1]

    def source(self, path: PathKey, entry: dict[str, Any]) -> None:
        kind = next((k for k in SOURCE_KINDS if k in entry), None)
        if kind is None or not self.sound((*path, kind)):
            return
        base = origin_dir(self.doc, path)
        if kind in ("agent", "openapi") and not _URL.match(entry[kind]) and not entry[kind].startswith("#"):
            try:
                confine(base / "_", base / entry[kind], what=f"the {kind} file")
            except ConfigError as exc:
                self.fail(exc.message, (*path, kind), hint=exc.hint)
                return
        if kind == "python":
            self.importable(entry["python"], (*path, "python"))
        elif kind == "agent":
            target = entry["agent"]
            if target.startswith("#"):
                if target[1:] not in self.team:
                    close = suggest(target[1:], self.team)
                    self.fail(
                        f"no agent named '{target[1:]}' in this file"
                        + (f" (did you mean '#{close}'?)" if close else ""),
                        (*path, "agent"),
                    )
            elif not (base / target).is_file():
                self.fail(
                    f"agent file not found: {target}", (*path, "agent"), hint=f"looked for {base / target}"
                )
        elif kind == "openapi":
            target = entry["openapi"]
            if not _URL.match(target) and not (base / target).is_file():
                self.fail(
                    f"OpenAPI file not found: {target}",
                    (*path, "openapi"),
                    hint="give an http(s) URL or a path relative to this file",
                )

    def output(self, path: PathKey, value: Any) -> None:
        """``output:``: a schema that is valid and whose references resolve, or a pydantic model."""
        from runner.agentfile import output_schema

        form = output_schema.output_form(value)
        if form == "python":
            try:
                output_schema.load_output(
                    OutputConfig(python=value["python"], base_dir=origin_dir(self.doc, path))
                )
            except ConfigError as exc:
                self.fail(exc.message, (*path, "python"), hint=exc.hint)
            return
        if form == "inline":
            for where, message in output_schema.schema_problems(value):
                self.fail(message, self.nearest((*path, *where)))
            return
        file = (origin_dir(self.doc, path) / value["file"]).resolve()
        try:
            schema, sources = output_schema.read_schema_file(file, value["file"])
        except ConfigError as exc:
            for error in exc.errors if isinstance(exc, ConfigErrors) else [exc]:
                if error.line:  # a place inside the schema file (a YAML syntax error, a duplicate key)
                    self.errors.append(error)
                else:  # the file as a whole (missing, a directory, too large, not text, empty): the key
                    message = error.message
                    if "output schema file" not in message:
                        message = f"output schema file {value['file']}: {message}"
                    self.fail(message, (*path, "file"), hint=error.hint)
            return
        for where, message in output_schema.schema_problems(schema):
            info = next(
                (sources.value(where[:n]) for n in range(len(where), -1, -1) if sources.value(where[:n])),
                None,
            )
            self.errors.append(
                error_at(message, info, where) if info else ConfigError(message, file=str(file))
            )

    def expect(self, path: PathKey, expect: dict[str, Any]) -> None:
        """A test's ``output_schema`` is a usable JSON Schema; its ``output_json`` paths are well formed."""
        from runner.agentfile import output_schema

        if isinstance(expect.get("output_schema"), dict):
            for where, message in output_schema.schema_problems(expect["output_schema"]):
                self.fail(message, self.nearest((*path, "output_schema", *where)))
        for key in _items(expect.get("output_json")):
            problem = output_json_path_problem(str(key[0]))
            if problem:
                self.fail(problem, (*path, "output_json", key[0]))

    def nearest(self, path: PathKey) -> PathKey:
        """``path``, or its closest ancestor that the source map knows (to locate an error)."""
        for end in range(len(path), 0, -1):
            if self.doc.sources.value(path[:end]) is not None:
                return path[:end]
        return path

    def importable(self, target: str, path: PathKey) -> None:
        try:
            obj = resolve_callable(target, origin_dir(self.doc, path))
        except ConfigError as exc:
            self.fail(exc.message, path, hint=exc.hint)
            return
        if ":" in target and not callable(obj):
            self.fail(f"'{target}' is not a function", path)


def output_json_path_problem(path: str) -> str | None:
    """What is wrong with a path of ``expect.output_json`` (keys separated by dots, list items by
    their index: ``temps.0``), or None."""
    if not path:
        return "an empty output_json path: name a key of the output (temps.0 for a list item)"
    if "[" in path or "]" in path or path.startswith("$"):
        what = "is not in dotted form: keys are separated by dots, list items named by their index"
        fixed = re.sub(r"\[\s*['\"]?([^'\"\]]*)['\"]?\s*\]", r".\1", path)
        fixed = re.sub(r"^\$\.?", "", fixed)
    elif "" in path.split("."):
        what, fixed = "has an empty part: keys are separated by single dots", path
    else:
        return None
    fixed = ".".join(part for part in fixed.split(".") if part)
    return f"output_json path {path!r} {what}" + (f" (did you mean {fixed!r}?)" if fixed else "")


def semantic_errors(
    doc: Document,
    prefix: PathKey = (),
    *,
    extra_vars: Iterable[str] = (),
    team: Iterable[str] = (),
    sound: Callable[[PathKey], bool] = _everything_sound,
    vars_known: bool = True,
) -> list[ConfigError]:
    """Problems of an agent body that only running code can find, in the parts ``sound`` passes.

    ``vars_known`` false (its ``extends`` is broken: the base may declare more) leaves out
    "undefined variable".
    """
    checker = _Checker(doc, prefix, extra_vars, team, sound=sound, vars_known=vars_known)
    return checker.run()
