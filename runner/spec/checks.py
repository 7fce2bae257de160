"""The checks a schema cannot make (SPEC section 4): imports, templates, references, secrets."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from runner.errors import ConfigError
from runner.spec.build import origin_dir
from runner.spec.imports import resolve_callable
from runner.spec.model import SOURCE_KINDS, TemplateSource
from runner.spec.templates import BUILTIN_NAMES, TemplateEngine
from runner.spec.validate import suggest
from runner.spec.yamlsrc import Document, PathKey, error_at

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


class _Checker:
    def __init__(self, doc: Document, prefix: PathKey, extra_vars: Iterable[str], team: Iterable[str]) -> None:
        self.doc = doc
        self.prefix = prefix
        self.body: dict[str, Any] = doc.data
        for part in prefix:
            self.body = self.body[part]
        self.variables = set(self.body.get("vars", {})) | set(extra_vars)
        self.team = set(team)
        self.engine = TemplateEngine(doc.path.parent)
        self.errors: list[ConfigError] = []

    def at(self, *path: str | int) -> PathKey:
        return (*self.prefix, *path)

    def fail(self, message: str, path: PathKey, *, hint: str | None = None) -> None:
        self.errors.append(error_at(message, self.doc.sources.value(path), path, hint=hint))

    def run(self) -> list[ConfigError]:
        self.api_key()
        for key, value in self.body.get("prompts", {}).items():
            if not key.startswith("x-") and value is not None:
                self.template(self.at("prompts", key), value)
        for i, entry in enumerate(self.body.get("tools", [])):
            self.source(self.at("tools", i), entry)
        for event, chain in self.body.get("hooks", {}).items():
            for i, hook in enumerate(chain if isinstance(chain, list) else []):
                path = self.at("hooks", event, i)
                if "python" in hook:
                    self.importable(hook["python"], (*path, "python"))
                elif "message" in hook:
                    self.template((*path, "message"), hook["message"])
        return self.errors

    def api_key(self) -> None:
        model = self.body.get("model")
        path = self.at("model", "api_key")
        if isinstance(model, dict) and model.get("api_key") and path not in self.doc.interpolated:
            self.fail(
                "a literal API key is not allowed in an agent file (it would end up in git)",
                path,
                hint="write api_key: ${OPENAI_API_KEY} (or your provider's variable) and set it in the "
                "environment",
            )

    def template(self, path: PathKey, value: Any) -> None:
        info = self.doc.sources.value(path)
        origin = Path(info.file) if info is not None else self.doc.path
        if isinstance(value, dict):
            file = (origin.parent / value["file"]).resolve()
            if not file.is_file():
                self.fail(f"template file not found: {value['file']}", (*path, "file"),
                          hint=f"looked for {file}")
                return
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                self.fail(f"cannot read template file {value['file']}: {exc}", (*path, "file"))
                return
            source = TemplateSource(text=text, origin=origin, file=file)
        else:
            line = info.line + (1 if info.block_scalar else 0) if info is not None else 1
            source = TemplateSource(text=str(value), origin=origin, line=line)
        try:
            names = self.engine.undeclared(source)
        except ConfigError as exc:
            self.errors.append(exc if exc.file else error_at(exc.message, info, path))
            return
        known = BUILTIN_NAMES | self.variables
        for name in sorted(names - known):
            close = suggest(name, known)
            message = f"template uses undefined variable '{name}'"
            message += f" (did you mean '{close}'?)" if close else ""
            where = source.name if source.file else None
            self.fail(message, path, hint=f"define it under vars: or pass --var {name}=..." +
                      (f" (in {where})" if where else ""))

    def source(self, path: PathKey, entry: dict[str, Any]) -> None:
        kind = next((k for k in SOURCE_KINDS if k in entry), None)
        base = origin_dir(self.doc, path)
        if kind == "python":
            self.importable(entry["python"], (*path, "python"))
        elif kind == "agent":
            target = entry["agent"]
            if target.startswith("#"):
                if target[1:] not in self.team:
                    close = suggest(target[1:], self.team)
                    self.fail(f"no agent named '{target[1:]}' in this file" +
                              (f" (did you mean '#{close}'?)" if close else ""), (*path, "agent"))
            elif not (base / target).is_file():
                self.fail(f"agent file not found: {target}", (*path, "agent"), hint=f"looked for {base / target}")
        elif kind == "openapi":
            target = entry["openapi"]
            if not _URL.match(target) and not (base / target).is_file():
                self.fail(f"OpenAPI file not found: {target}", (*path, "openapi"),
                          hint="give an http(s) URL or a path relative to this file")

    def importable(self, target: str, path: PathKey) -> None:
        try:
            obj = resolve_callable(target, origin_dir(self.doc, path))
        except ConfigError as exc:
            self.fail(exc.message, path, hint=exc.hint)
            return
        if ":" in target and not callable(obj):
            self.fail(f"'{target}' is not a function", path)


def semantic_errors(
    doc: Document, prefix: PathKey = (), *, extra_vars: Iterable[str] = (), team: Iterable[str] = ()
) -> list[ConfigError]:
    """Problems of a schema-valid agent body that only running code can find."""
    return _Checker(doc, prefix, extra_vars, team).run()
