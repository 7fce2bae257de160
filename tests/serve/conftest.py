"""Fixtures of the ``runner serve`` tests: agents on a scripted model, the app on uvicorn, checked clients.

Every HTTP response the tests receive goes through ``CheckingTransport`` (the openai SDK's clients
and plain httpx alike): at the end of each test, every event stream is checked against the chunk
rules of seed 002 (``check_sse``), every whole completion against ``check_completion``, every error
against OpenAI's error shape. A test that cuts a stream short on purpose says so with
``recorder.allow_partial = True``; its unfinished streams are then checked as prefixes.
"""

from __future__ import annotations

import html
import json
import re
import textwrap
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from runner.runtime import RuntimeSettings
from runner.serve.app import create_app
from runner.serve.catalog import load_catalog
from runner.serve.reload import CatalogHolder
from runner.serve.server import server_config
from runner.testing import ScriptedServer
from runner.tls import tls_context
from tests.server_thread import ServerThread, stop_all

DETAILS = re.compile(
    r'<details type="tool_calls" done="true" id="(?P<id>[^"<>]*)" name="(?P<name>[^"<>]*)" '
    r'arguments="(?P<arguments>[^"<>\']*)">\n'
    r"<summary>Tool Executed</summary>\n(?P<body>[^\"<>'\n]*)\n</details>\n"
)


@dataclass
class Block:
    """A details block found in content, unescaped."""

    call_id: str
    name: str
    arguments: Any
    result: Any


def check_details(content: str) -> list[Block]:
    """Every ``<details`` in ``content`` is a well-formed seed-002 block on a line of its own."""
    blocks: list[Block] = []
    matches = list(DETAILS.finditer(content))
    assert content.count("<details") == len(matches), f"malformed details block in {content!r}"
    assert content.count("</details>") == len(matches), f"stray </details> in {content!r}"
    for match in matches:
        assert match.start() == 0 or content[match.start() - 1] == "\n", "a block must start a line"
        for part in ("arguments", "body"):
            escaped = match.group(part)
            assert html.escape(html.unescape(escaped)) == escaped, f"{part} is not HTML-escaped: {escaped!r}"
        blocks.append(
            Block(
                html.unescape(match.group("id")),
                html.unescape(match.group("name")),
                json.loads(html.unescape(match.group("arguments"))),
                json.loads(html.unescape(match.group("body"))),
            )
        )
    return blocks


@dataclass
class SseResult:
    """A checked event stream: its chunks, content, finish reason, client calls and usage."""

    chunks: list[dict[str, Any]]
    content: str
    finish_reason: str | None
    tool_calls: list[dict[str, Any]]
    usage: dict[str, Any] | None
    blocks: list[Block]


def parse_sse(raw: bytes) -> list[str]:
    """The ``data`` of each event (comments such as keep-alive pings skipped)."""
    text = raw.decode("utf-8").replace("\r\n", "\n")
    datas = []
    for event in text.split("\n\n"):
        lines = [line for line in event.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        assert all(line.startswith("data: ") for line in lines), f"not a data event: {event!r}"
        datas.append("\n".join(line[len("data: ") :] for line in lines))
    return datas


def check_sse(raw: bytes, *, complete: bool = True) -> SseResult:
    """Assert the seed-002 chunk rules on a raw stream; ``complete=False`` checks a cut stream's prefix."""
    datas = parse_sse(raw)
    if complete:
        assert datas and datas[-1] == "[DONE]", f"the stream does not end with [DONE]: {datas[-3:]}"
    assert "[DONE]" not in datas[:-1], "events after [DONE]"
    chunks = [json.loads(d) for d in datas if d != "[DONE]"]
    assert chunks, "no chunks"
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)
        assert chunk["object"] == "chat.completion.chunk"
        assert isinstance(chunk["created"], int) and isinstance(chunk["model"], str) and chunk["model"]
        assert chunk["id"] == chunks[0]["id"]
    with_choices = [i for i, c in enumerate(chunks) if c["choices"]]
    assert with_choices and with_choices[0] == 0, "the first chunk must carry a choice"
    assert chunks[0]["choices"][0]["delta"].get("role") == "assistant", "the first delta must set the role"
    finishes: list[tuple[int, str]] = []
    calls: list[dict[str, Any]] = []
    content: list[str] = []
    for position in with_choices:
        choices = chunks[position]["choices"]
        assert len(choices) == 1 and choices[0]["index"] == 0 and isinstance(choices[0]["delta"], dict)
        delta = choices[0]["delta"]
        if delta.get("role") is not None:
            assert position == 0, "role set again after the first chunk"
        if choices[0].get("finish_reason") is not None:
            finishes.append((position, choices[0]["finish_reason"]))
        calls.extend(delta.get("tool_calls") or [])
        content.append(delta.get("content") or "")
    reason = finishes[0][1] if finishes else None
    assert len(finishes) <= 1, f"finish_reason set {len(finishes)} times"
    if finishes:
        assert finishes[0][0] == with_choices[-1], "finish_reason must be on the last choice chunk"
        assert reason in ("stop", "tool_calls")
    if complete:
        assert finishes, "no finish_reason"
    usage_chunks = [c for c in chunks if not c["choices"]]
    for chunk in usage_chunks:
        assert chunks.index(chunk) > with_choices[-1], "usage before the finish"
        assert isinstance(chunk["usage"], dict) and isinstance(chunk["usage"]["total_tokens"], int)
    if calls:
        assert reason == "tool_calls", "delta.tool_calls in an answer that does not end with tool_calls"
    if reason == "tool_calls":
        assert calls, "finish_reason tool_calls without delta.tool_calls"
    text = "".join(content)
    return SseResult(
        chunks, text, reason, calls, usage_chunks[-1]["usage"] if usage_chunks else None, check_details(text)
    )


def check_completion(body: dict[str, Any]) -> list[Block]:
    """A whole ``chat.completion``: the SDK's model, one choice, a consistent finish, valid blocks."""
    ChatCompletion.model_validate(body)
    assert body["object"] == "chat.completion"
    (choice,) = body["choices"]
    message = choice["message"]
    assert message["role"] == "assistant"
    assert choice["finish_reason"] == ("tool_calls" if message.get("tool_calls") else "stop")
    return check_details(message.get("content") or "")


def check_error(status: int, body: Any) -> None:
    """OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}``."""
    assert isinstance(body, dict) and set(body) == {"error"}, f"not an OpenAI error ({status}): {body!r}"
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert isinstance(body["error"]["type"], str) and body["error"]["type"]


def check_pipe_output(items: Sequence[Any]) -> tuple[str, str, list[dict[str, Any]]]:
    """What an Open WebUI pipe yielded: strings and chunk dicts, one finish on the last item (seed 002).

    Returns the content, the finish reason and the client calls.
    """
    assert items, "the pipe yielded nothing"
    content: list[str] = []
    calls: list[dict[str, Any]] = []
    finishes: list[tuple[int, str]] = []
    for position, item in enumerate(items):
        if isinstance(item, str):
            content.append(item)
            continue
        assert isinstance(item, dict) and set(item) == {"choices"}, f"not a chunk: {item!r}"
        (choice,) = item["choices"]
        delta = choice["delta"]
        content.append(delta.get("content") or "")
        calls.extend(delta.get("tool_calls") or [])
        if choice.get("finish_reason") is not None:
            finishes.append((position, choice["finish_reason"]))
    assert len(finishes) == 1 and finishes[0][0] == len(items) - 1, (
        f"finish_reason must end the stream once: {finishes}"
    )
    reason = finishes[0][1]
    assert reason in ("stop", "tool_calls")
    assert bool(calls) == (reason == "tool_calls"), "delta.tool_calls only to end with tool_calls"
    text = "".join(content)
    check_details(text)
    return text, reason, calls


@dataclass
class Recorded:
    """One response the tests received."""

    url: str
    status: int
    content_type: str
    body: bytes
    finished: bool


@dataclass
class Recorder:
    """Keeps every response; ``verify`` checks them all."""

    responses: list[Recorded] = field(default_factory=list)
    allow_partial: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, record: Recorded) -> None:
        with self.lock:
            self.responses.append(record)

    def streams(self) -> list[Recorded]:
        return [r for r in self.responses if r.content_type.startswith("text/event-stream")]

    def verify(self) -> int:
        """Check every recorded response; the number of event streams checked."""
        checked = 0
        for record in list(self.responses):
            if record.content_type.startswith("text/event-stream"):
                # the openai SDK stops reading at [DONE]: such a stream is complete too
                complete = record.finished or b"data: [DONE]" in record.body
                if not complete:
                    assert self.allow_partial, f"a stream from {record.url} was cut short"
                check_sse(record.body, complete=complete)
                checked += 1
            elif record.status >= 400 and record.finished:
                check_error(record.status, json.loads(record.body))
            elif record.url.endswith("/chat/completions") and record.finished:
                check_completion(json.loads(record.body))
        return checked


class _TeeSync(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, done: Callable[[bytes, bool], None]) -> None:
        self._inner, self._done, self._buffer, self._finished = inner, done, bytearray(), False

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            self._buffer += chunk
            yield chunk
        self._finished = True

    def close(self) -> None:
        self._inner.close()
        self._done(bytes(self._buffer), self._finished)


class _TeeAsync(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, done: Callable[[bytes, bool], None]) -> None:
        self._inner, self._done, self._buffer, self._finished = inner, done, bytearray(), False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._buffer += chunk
            yield chunk
        self._finished = True

    async def aclose(self) -> None:
        await self._inner.aclose()
        self._done(bytes(self._buffer), self._finished)


def _recording(
    recorder: Recorder, request: httpx.Request, response: httpx.Response
) -> Callable[[bytes, bool], None]:
    def done(body: bytes, finished: bool) -> None:
        kind = response.headers.get("content-type", "")
        recorder.add(Recorded(str(request.url), response.status_code, kind, body, finished))

    return done


class CheckingTransport(httpx.BaseTransport):
    """An httpx transport that records every response for ``Recorder.verify``."""

    def __init__(self, recorder: Recorder) -> None:
        self.inner = httpx.HTTPTransport(verify=tls_context())
        self.recorder = recorder

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        assert isinstance(response.stream, httpx.SyncByteStream)
        tee = _TeeSync(response.stream, _recording(self.recorder, request, response))
        return httpx.Response(
            response.status_code, headers=response.headers, stream=tee, extensions=response.extensions
        )

    def close(self) -> None:
        self.inner.close()


class AsyncCheckingTransport(httpx.AsyncBaseTransport):
    """The async ``CheckingTransport``."""

    def __init__(self, recorder: Recorder) -> None:
        self.inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=200), verify=tls_context())
        self.recorder = recorder

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        tee = _TeeAsync(response.stream, _recording(self.recorder, request, response))
        return httpx.Response(
            response.status_code, headers=response.headers, stream=tee, extensions=response.extensions
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class Served:
    """The app on uvicorn in a background thread (127.0.0.1, a free port), with checked clients."""

    def __init__(self, app: Any, recorder: Recorder, holder: CatalogHolder, **limits: Any) -> None:
        self.app = app
        self.recorder = recorder
        self.holder = holder
        config = server_config(
            app, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=1, **limits
        )
        self.thread = ServerThread(config)
        self.server = self.thread.server
        self.url = ""

    def start(self) -> None:
        self.url = self.thread.start()

    def request_exit(self) -> None:
        self.thread.request_exit()

    def join(self) -> None:
        self.thread.join()

    def stop(self) -> None:
        self.thread.stop()

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def http(self, **options: Any) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, transport=CheckingTransport(self.recorder), timeout=30, **options
        )

    def async_http(self, **options: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.url, transport=AsyncCheckingTransport(self.recorder), timeout=60, **options
        )

    def openai(self, api_key: str = "sk-none") -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base_url, api_key=api_key, http_client=self.http(), max_retries=0)

    def async_openai(self, api_key: str = "sk-none") -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=self.base_url, api_key=api_key, http_client=self.async_http(), max_retries=0
        )

    def runs(self) -> int:
        """How many runs the server still tracks (each is dropped when its session has closed)."""
        state = self.app.state.serve if hasattr(self.app.state, "serve") else None
        return len(state.runs) if state is not None else -1


@dataclass
class AgentFiles:
    """Writes agent files on a scripted model (and their Python modules, under unique names) into one
    folder: the serve doors' tests share it. ``description``: every agent's (``{name}`` filled in)."""

    root: Path
    description: str | None = None

    def write(
        self,
        name: str,
        server: ScriptedServer,
        body: str = "",
        *,
        tools: str | None = None,
        filename: str | None = None,
        model: str = "",
        hooks: str = "",
    ) -> Path:
        """``hooks``: a module whose ``ended`` runs as the agent's ``session_end`` hook."""
        text = textwrap.dedent(
            f"""\
            version: 1
            name: {name}
            model:
              id: openai/scripted
              api_base: {server.base_url}
              api_key: ${{SCRIPTED_API_KEY:-sk-test}}
              retries: 0
            """
        )
        text += textwrap.indent(textwrap.dedent(model).strip("\n"), "  ") + "\n" if model.strip() else ""
        if self.description:
            text += f"description: {self.description.format(name=name)}\n"
        text += textwrap.dedent(body).strip("\n") + "\n" if body.strip() else ""
        if tools is not None:
            text += f"tools:\n  - python: {self._module('tools', tools)}\n"
        if hooks:
            text += f"hooks:\n  session_end:\n    - python: {self._module('hooks', hooks)}:ended\n"
        path = self.root / (filename or f"{name}.yaml")
        path.write_text(text, encoding="utf-8")
        return path

    def _module(self, kind: str, source: str) -> str:
        module = f"serve_{kind}_{uuid.uuid4().hex[:10]}"
        (self.root / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        return module


@pytest.fixture
def scripted(scripted_server: Callable[..., ScriptedServer]) -> Callable[..., ScriptedServer]:
    """Scripted model servers on loopback, closed after the test (the plugin's fixture)."""
    return scripted_server


@pytest.fixture
def agent_files(tmp_path: Path) -> AgentFiles:
    root = tmp_path / "agents"
    root.mkdir()
    return AgentFiles(root)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def check_stream() -> Callable[..., SseResult]:
    """``check_sse``: the seed-002 chunk rules on a raw event stream."""
    return check_sse


@pytest.fixture
def check_pipe() -> Callable[..., tuple[str, str, list[dict[str, Any]]]]:
    """``check_pipe_output``: the seed-002 rules on what a pipe yielded."""
    return check_pipe_output


@pytest.fixture
def check_whole() -> Callable[..., list[Block]]:
    """``check_completion``: the rules of a whole ``chat.completion``."""
    return check_completion


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    """Every response of the test, checked at its end."""
    recorder = Recorder()
    yield recorder
    recorder.verify()


@contextmanager
def served_apps(home: Path, recorder: Recorder) -> Iterator[Callable[..., Served]]:
    """``start(paths, server={...}, **create_app_options)`` serves ``paths`` until the block ends
    (RUNNER_HOME ``home``, responses checked by ``recorder``); then every server stops.

    ``server`` holds the connection limits of ``server_config`` (``header_timeout_s``, ...).
    """
    started: list[Served] = []

    def start(paths: Sequence[Path], *, server: dict[str, Any] | None = None, **options: Any) -> Served:
        holder = CatalogHolder(list(paths), load_catalog(list(paths)))
        options.setdefault("settings", RuntimeSettings(home=home))
        served = Served(create_app(holder, **options), recorder, holder, **(server or {}))
        served.start()
        started.append(served)
        return served

    try:
        yield start
    finally:
        stop_all(started)


@pytest.fixture
def serve_app(home: Path, recorder: Recorder) -> Iterator[Callable[..., Served]]:
    """``serve_app(paths, server={...}, **create_app_options)`` serves ``paths`` until the test ends."""
    with served_apps(home, recorder) as start:
        yield start
