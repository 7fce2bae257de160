"""An editor for the ACP tests: the official SDK's client side driving ``runner acp`` as a subprocess.

``Editor`` starts ``python -m runner acp AGENT`` in a project folder, reads every line the agent
writes on stdout (``lines``: what the protocol-only check reads) and hands it to the SDK's
``ClientSideConnection``. ``EditorClient`` is the client side: it records every ``session/update``
and answers permission requests from a list (``"allow"``, ``"always"``, ``"reject"``, ``"never"``
to leave the request unanswered).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import connect_to_agent
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

from runner.testing import ScriptedServer

WORKTREE = Path(__file__).resolve().parents[2]
WAIT_S = 20.0


def last_user_text(body: dict[str, Any]) -> str:
    """The newest user message of a chat request (the runner's own notes skipped)."""
    for message in reversed(body["messages"]):
        content = message.get("content")
        if message["role"] == "user" and isinstance(content, str) and not content.startswith("[runner"):
            return content
    return ""


#: Set when the model is asked for a "late" answer (it is then waiting: no token has come yet).
ASKED_LATE = threading.Event()


def script(body: dict[str, Any]) -> dict[str, Any]:
    """The scripted model of these tests: the first word of the user's message says what to do."""
    if body["messages"][-1]["role"] == "tool":
        return {"content": "done: " + str(body["messages"][-1]["content"])[:60]}
    word = last_user_text(body).split(" ", 1)[0]
    if word == "late":
        ASKED_LATE.set()
    answers: dict[str, dict[str, Any]] = {
        "hello": {"reasoning": "The user greets me.", "content": "Hello from the agent."},
        "read": {"tool_calls": [{"name": "files_read", "arguments": {"path": "notes.txt"}}]},
        "run": {"tool_calls": [{"name": "shell", "arguments": {"command": "echo ran-it"}}]},
        "plan": {"tool_calls": [{"name": "todo_add", "arguments": {"text": "write the tests"}}]},
        "noisy": {"tool_calls": [{"name": "shout", "arguments": {}}]},
        "slow": {"content": "word " * 40, "chunk_delay_s": 0.25},
        "late": {"content": "too late", "delay_s": 30},
        "long": {"content": "cut short", "finish_reason": "length"},
        "filtered": {"content": "no", "finish_reason": "content_filter"},
        "broken": {"status": 500, "error": "the model is down"},
    }
    return answers.get(word, {"content": f"echo: {word}"})


AGENT = """\
version: 1
name: helper
description: A helper for the editor tests.
model:
  id: openai/scripted
  api_base: {base_url}
  api_key: ${{TEST_KEY:-sk-test}}
  retries: 0
prompts:
  system: Help in the editor.
tools:
  - builtin: files
    with: {{root: .}}
  - builtin: shell
    with: {{cwd: .}}
    timeout_s: {tool_timeout_s}
  - builtin: todo
  - python: noisy:shout
limits:
  tool_timeout_s: {tool_timeout_s}
"""

NOISY = '''\
import os


def shout() -> str:
    """Write to stdout in every way a tool can."""
    print("printed-to-stdout")
    os.write(1, b"written-to-fd-1\\n")
    return "shouted"
'''


def write_agent(folder: Path, base_url: str, *, tool_timeout_s: float = 60) -> Path:
    """The test agent in ``folder`` (its tools' roots relative: the session's folder decides)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "noisy.py").write_text(NOISY, encoding="utf-8")
    path = folder / "agent.yaml"
    path.write_text(AGENT.format(base_url=base_url, tool_timeout_s=tool_timeout_s), encoding="utf-8")
    return path


@dataclass
class EditorClient:
    """The editor's side: updates recorded, permission requests answered from ``answers``."""

    answers: list[str] = field(default_factory=list)
    updates: list[tuple[str, Any]] = field(default_factory=list)
    asked: list[Any] = field(default_factory=list)
    changed: asyncio.Condition | None = None

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **_: Any) -> Any:
        self.asked.append(tool_call)
        await self._changed()
        answer = self.answers.pop(0) if self.answers else "reject"
        if answer == "never":
            await asyncio.Event().wait()
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        assert answer in {option.option_id for option in options}, options
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append((session_id, update))
        await self._changed()

    async def _changed(self) -> None:
        if self.changed is None:
            self.changed = asyncio.Condition()
        async with self.changed:
            self.changed.notify_all()

    async def wait_for(self, check: Callable[[], bool], *, timeout: float = WAIT_S) -> None:
        """Until ``check()`` holds (an update or a permission request arrives meanwhile)."""
        if self.changed is None:
            self.changed = asyncio.Condition()
        async with asyncio.timeout(timeout), self.changed:
            await self.changed.wait_for(check)

    def of(self, session_id: str, kind: str | None = None) -> list[Any]:
        """The updates of one session (of one ``sessionUpdate`` kind)."""
        return [u for s, u in self.updates if s == session_id and (kind is None or u.session_update == kind)]


@dataclass
class Editor:
    """A running ``runner acp`` with the SDK's client connected to it."""

    conn: Any
    process: asyncio.subprocess.Process
    client: EditorClient
    project: Path
    home: Path
    stderr: Path
    #: Every line the agent wrote on stdout.
    lines: list[bytes]
    #: The agent's answer to ``initialize``.
    initialized: Any = None

    async def new_session(self, **kw: Any) -> str:
        response = await self.conn.new_session(cwd=str(self.project), mcp_servers=[], **kw)
        return str(response.session_id)

    def stderr_text(self) -> str:
        return self.stderr.read_text(encoding="utf-8", errors="replace")


def environment(home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    env.update(
        {"RUNNER_HOME": str(home), "PYTHONPATH": str(WORKTREE), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    )
    return env


@contextlib.asynccontextmanager
async def editor(root: Path, agent: Path, *, args: tuple[str, ...] = ()) -> AsyncIterator[Editor]:
    """``runner acp AGENT`` started in ``root/project``, initialized, closed (stdin first) at the end."""
    project, home = root / "project", root / "home"
    project.mkdir(parents=True, exist_ok=True)
    stderr_path = root / "stderr.txt"
    with stderr_path.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "runner",
            "acp",
            str(agent),
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            cwd=str(project),
            env=environment(home),
        )
    assert process.stdin is not None and process.stdout is not None
    lines: list[bytes] = []
    feed = asyncio.StreamReader(limit=50 * 1024 * 1024)
    pump = asyncio.create_task(_tee(process.stdout, feed, lines))
    client = EditorClient()
    conn = connect_to_agent(client, process.stdin, feed)
    try:
        initialized = await conn.initialize(protocol_version=1)
        yield Editor(conn, process, client, project, home, stderr_path, lines, initialized)
    finally:
        with contextlib.suppress(Exception):
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), WAIT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
        await pump
        await conn.close()


async def _tee(source: asyncio.StreamReader, feed: asyncio.StreamReader, lines: list[bytes]) -> None:
    while line := await source.readline():
        lines.append(line)
        feed.feed_data(line)
    feed.feed_eof()


def protocol_lines(lines: list[bytes]) -> list[dict[str, Any]]:
    """Every stdout line as a JSON-RPC 2.0 message (an assertion error names the first that is not)."""
    messages = []
    for line in lines:
        try:
            message = json.loads(line)
        except ValueError:
            raise AssertionError(f"not a JSON-RPC line on stdout: {line[:200]!r}") from None
        assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", line[:200]
        messages.append(message)
    return messages


def scripted_server() -> ScriptedServer:
    return ScriptedServer(script, chunks=8)
