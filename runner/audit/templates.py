"""Every file an agent's templates read, found without rendering them.

A prompt's ``file:`` is read when the file is loaded; ``{% include %}``, ``{% import %}``,
``{% from ... import %}`` and ``{% extends %}`` name templates that Jinja's loader reads from the
agent's folder when the template renders. Those names are found in the parsed templates (and, in
turn, in the files they name), the way the loader resolves them; a name computed at render time
(``{% include name_var %}``) cannot be known and is listed as such. Each file is flagged when it is
written as an absolute path, when it resolves outside the agent's repository (outside its folder
when there is no repository), or when a symbolic link leads to it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Literal

import jinja2
from jinja2 import meta
from jinja2.loaders import split_template_path

from runner.agentfile.config import AgentConfig, TemplateSource
from runner.audit.report import TemplateFile

__all__ = ["template_files"]

#: Files followed through includes, at most (a listing, not a crawl).
_MAX_FILES = 200


def _templates(config: AgentConfig) -> Iterator[tuple[str, TemplateSource]]:
    """Each template of the agent with where it is written: its prompts and ``message:`` hooks."""
    for name in ("system", "user", "status", "tool_selection"):
        source = getattr(config.prompts, name)
        if source is not None:
            yield f"prompts.{name}", source
    for event, chain in config.hooks.items():
        for index, hook in enumerate(chain):
            if hook.kind == "message":
                yield f"hooks.{event}[{index}]", TemplateSource(hook.value, origin=config.path)


def _through_link(base: Path, parts: Iterable[str]) -> bool:
    """Whether the way from folder ``base`` (resolved) along ``parts`` passes a symbolic link."""
    current = base
    for part in parts:
        if part in ("", "."):
            continue
        if part == "..":
            current = current.parent  # ``current`` is no link here: this is its real parent
            continue
        current = current / part  # an absolute part (the root) replaces ``current``
        if current.is_symlink():
            return True
    return False


class _Finder:
    def __init__(
        self, config: AgentConfig, repository: Path | None, read_text: Callable[[Path], str]
    ) -> None:
        self.inside = config.directory.resolve()
        self.repository = repository.resolve() if repository is not None else None
        self.read_text = read_text
        self.env = jinja2.Environment()
        self.found: list[TemplateFile] = []
        self.seen: set[Path] = set()

    def where(self, file: Path) -> str:
        if file.is_relative_to(self.inside):
            return "folder"
        if self.repository is not None and file.is_relative_to(self.repository):
            return "repository"
        return "outside"

    def add(
        self,
        use: str,
        via: Literal["file", "include"],
        written: str,
        base: Path,
        parts: list[str],
        text: str | None,
    ) -> None:
        """One file read by ``use`` (``parts`` from folder ``base``); then the files its text names."""
        resolved = Path(os.path.realpath(base.joinpath(*parts)))
        exists = resolved.is_file()
        self.found.append(
            TemplateFile(
                use=use,
                via=via,
                written=written,
                file=str(resolved),
                where=self.where(resolved),
                absolute=Path(written).is_absolute(),
                symlink=_through_link(base, parts),
                problem=None if exists else "not found",
            )
        )
        if not exists or resolved in self.seen or len(self.seen) >= _MAX_FILES:
            return
        self.seen.add(resolved)
        if text is None:
            try:
                text = self.read_text(resolved)
            except (OSError, UnicodeDecodeError, ValueError):
                return  # the render reports it; the file is listed either way
        self.names(use, text)

    def names(self, use: str, text: str) -> None:
        """The files a template's ``include`` / ``import`` / ``extends`` tags name."""
        try:
            referenced = list(meta.find_referenced_templates(self.env.parse(text)))
        except (jinja2.TemplateSyntaxError, RecursionError):
            return  # `runner validate` reports the syntax error
        for name in referenced:
            if name is None:
                self.found.append(
                    TemplateFile(use, "include", None, None, "unknown", problem="computed at render time")
                )
                continue
            try:
                pieces = split_template_path(name)
            except jinja2.TemplateNotFound:
                problem = "refused by the loader ('..' is not allowed)"
                self.found.append(TemplateFile(use, "include", name, None, "unknown", problem=problem))
                continue
            self.add(use, "include", name, self.inside, pieces, None)


def template_files(
    config: AgentConfig, *, repository: Path | None, read_text: Callable[[Path], str]
) -> list[TemplateFile]:
    """Every file the templates of ``config`` read, in the order they are named."""
    finder = _Finder(config, repository, read_text)
    for use, source in _templates(config):
        if source.file is not None:
            written = source.written or str(source.file)
            text = source.text if source.file.is_file() else None
            finder.add(use, "file", written, source.origin.parent.resolve(), list(Path(written).parts), text)
        else:
            finder.names(use, source.text)
    return finder.found
