"""Cassettes: recorded model requests and responses, for offline replay (SPEC section 12).

A cassette is JSONL. Line 1 is a header (agent, its file's sha256 and git state, runner version,
model, when it was recorded); then one ``interaction`` per model call: the normalized request
(model, messages, tools, params), its sha256, and the full response (with the provider's
``response_id`` and the cached prompt tokens in its usage) — for a streamed response also the
sequence of events with their timing. Secrets are replaced by ``***`` before hashing
and writing, so a cassette holds none and replay hashes the same way.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from runner.errors import RunnerError
from runner.store.transcript import Redactor, now_iso
from runner.text import valid_text

__all__ = [
    "FORMAT",
    "Cassette",
    "CassetteError",
    "CassetteWriter",
    "Interaction",
    "canonical",
    "normalize_request",
    "read_cassette",
    "readable_diff",
    "request_hash",
]

FORMAT = 1


class CassetteError(RunnerError):
    """A cassette cannot be read, belongs elsewhere, or does not match the run."""

    exit_code = 1


def normalize_request(
    model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, params: dict[str, Any]
) -> dict[str, Any]:
    """What identifies a model request: model, messages, tools and the parameters that shape the answer."""
    kept = {k: v for k, v in sorted(params.items()) if k not in ("timeout", "stream_options", "api_key")}
    return {"model": model, "messages": messages, "tools": tools or [], "params": kept}


def canonical(value: Any) -> str:
    """Stable JSON text (sorted keys, no spaces) used for hashing."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def request_hash(normalized: dict[str, Any]) -> str:
    """The sha256 of a normalized request."""
    return hashlib.sha256(canonical(normalized).encode()).hexdigest()


def readable_diff(
    recorded: dict[str, Any], actual: dict[str, Any], *, context: int = 2, limit: int = 40
) -> str:
    """A unified diff of two normalized requests, as indented JSON, cut to ``limit`` lines."""
    a = json.dumps(recorded, indent=1, sort_keys=True, ensure_ascii=False, default=str).splitlines()
    b = json.dumps(actual, indent=1, sort_keys=True, ensure_ascii=False, default=str).splitlines()
    lines = list(difflib.unified_diff(a, b, "recorded", "this run", n=context, lineterm=""))
    if len(lines) > limit:
        lines = [*lines[:limit], f"... ({len(lines) - limit} more diff lines)"]
    return "\n".join(lines)


@dataclass
class Interaction:
    """One recorded model call."""

    index: int
    request: dict[str, Any]
    hash: str
    response: dict[str, Any]
    stream: bool = False
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Cassette:
    """A cassette read from disk."""

    path: Path
    header: dict[str, Any]
    interactions: list[Interaction]


def read_cassette(path: Path) -> Cassette:
    """Read and check a cassette; every problem is a ``CassetteError`` naming the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CassetteError(f"cassette not found: {path}", hint="record one with --record FILE") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CassetteError(f"cannot read cassette {path}: {exc}") from None
    lines = text.splitlines()
    if not lines:
        raise CassetteError(f"{path}: the cassette is empty")
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            what = "truncated" if number == len(lines) else "corrupt"
            raise CassetteError(
                f"{path}:{number}: {what} cassette line ({exc.msg})",
                hint="record it again with --record (or runner test --update)",
            ) from None
        if not isinstance(record, dict):
            raise CassetteError(f"{path}:{number}: a cassette line must be a JSON object")
        records.append((number, record))
    number, header = records[0]
    if header.get("type") != "header" or header.get("format") != FORMAT:
        raise CassetteError(f"{path}:1: not a runner cassette (no format {FORMAT} header)")
    interactions = []
    for number, record in records[1:]:
        try:
            interactions.append(
                Interaction(
                    index=int(record["index"]),
                    request=record["request"],
                    hash=str(record["hash"]),
                    response=record["response"],
                    stream=bool(record.get("stream", False)),
                    events=list(record.get("events", [])),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CassetteError(f"{path}:{number}: malformed interaction ({exc})") from None
    return Cassette(path, header, interactions)


class CassetteWriter:
    """Writes a cassette as the run goes (each interaction flushed), secrets redacted."""

    def __init__(self, path: Path, *, redact: Redactor, header: dict[str, Any]) -> None:
        self.path = path
        self.redact = redact
        self.count = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = path.open("w", encoding="utf-8")
        self._write({"type": "header", "format": FORMAT, "recorded_at": now_iso(), **header})

    def _write(self, record: dict[str, Any]) -> None:
        assert self._file is not None, "cassette already closed"
        line = self.redact(json.dumps(record, ensure_ascii=False, default=str))
        self._file.write(valid_text(line) + "\n")
        self._file.flush()

    def normalized(self, normalized: dict[str, Any]) -> dict[str, Any]:
        """The request as it will be stored (and hashed): secrets replaced."""
        result: dict[str, Any] = json.loads(self.redact(canonical(normalized)))
        return result

    def add(
        self,
        normalized: dict[str, Any],
        response: dict[str, Any],
        *,
        stream: bool,
        events: list[dict[str, Any]],
    ) -> None:
        """Append one interaction."""
        stored = self.normalized(normalized)
        self._write(
            {
                "type": "interaction",
                "index": self.count,
                "hash": request_hash(stored),
                "stream": stream,
                "request": stored,
                "response": response,
                "events": events,
            }
        )
        self.count += 1

    def close(self) -> None:
        """Close the file."""
        if self._file is not None:
            self._file.close()
            self._file = None
